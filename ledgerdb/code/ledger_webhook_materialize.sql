-- Writes the webhook events of the given jobs (every event their committed rows make,
-- ledger_webhook_job_events, in each job's order) and the balance.low of the given debit rows that
-- crossed their account's threshold, skipping any already written, and queues each new event for
-- delivery; answers how many events it wrote. Called by the derive pass and by a replay, outside
-- any money transaction.
--
-- A job's events are always written all together, earliest first, so that a job's later event can
-- never get a lower seq than its earlier one, even when the later transition's transaction ID is
-- the older one and is read first: every event of the job committed by then is written with it.
--
-- A new event is queued for every enabled endpoint of its account — or, when p_endpoint is given
-- (a replay to that endpoint), only for it when its transaction is below p_horizon, the derive
-- cursor (a pass read it already and found no endpoint wanting it then); an event at or above the
-- horizon is one the next pass would have queued for every endpoint, so it still is.
--
-- balance.low: a debit (a charge, a reclaim, a negative adjustment) that took the balance from at
-- or above the account's threshold to below it, the reclaim measured after the release written
-- with it; the threshold is the account's when the event is derived. A debit of the moment the
-- derived outbox replaced the old one may have its balance.low written already by the old code,
-- which kept no entry_id: the same account at the same transaction time is that event.
CREATE FUNCTION ledger_webhook_materialize(p_jobs text[], p_debits bigint[], p_endpoint text, p_horizon xid8)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH derived AS (
        SELECT j.account_id, j.id AS job_id, NULL::bigint AS entry_id, e.type, e.rank, e.src_xid, e.at, e.payload
        FROM jobs j CROSS JOIN LATERAL ledger_webhook_job_events(j) e
        WHERE j.id = ANY (p_jobs)
        UNION ALL
        SELECT d.account_id, NULL, d.id, 'balance.low', 0, d.xid, d.created_at, jsonb_build_object(
            'account_id', d.account_id,
            'balance', a.after,
            'threshold', t.threshold,
            'job_id', CASE WHEN d.job_id IS NULL THEN NULL ELSE substr(d.job_id, char_length(d.account_id) + 2) END)
        FROM ledger_entries d
        JOIN webhook_low_balance t ON t.account_id = d.account_id
        CROSS JOIN LATERAL (SELECT coalesce((SELECT r.balance_after FROM ledger_entries r
                                             WHERE d.kind = 'reclaim' AND r.job_id = d.job_id AND r.kind = 'release'),
                                            d.balance_after) AS after) a
        WHERE d.id = ANY (p_debits) AND d.amount < 0
          AND d.balance_after - d.amount >= t.threshold AND a.after < t.threshold
          AND NOT EXISTS (SELECT 1 FROM webhook_events old
                          WHERE old.account_id = d.account_id AND old.type = 'balance.low'
                            AND old.entry_id IS NULL AND old.created_at = d.created_at)
    ), written AS (
        INSERT INTO webhook_events (id, account_id, job_id, entry_id, type, payload, created_at)
        SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), account_id, job_id, entry_id, type, payload, at
        FROM derived
        -- Jobs by their first transition's time, each job's events in its own order.
        ORDER BY min(at) OVER (PARTITION BY coalesce(job_id, 'entry/' || entry_id)), job_id, rank, entry_id
        ON CONFLICT DO NOTHING
        RETURNING seq, account_id, job_id, type, entry_id
    ), sources AS (
        SELECT w.*, d.src_xid FROM written w
        JOIN derived d ON d.account_id = w.account_id AND d.type = w.type
             AND d.job_id IS NOT DISTINCT FROM w.job_id AND d.entry_id IS NOT DISTINCT FROM w.entry_id
    ), queued AS (
        INSERT INTO webhook_deliveries (endpoint_id, event_seq, job_id)
        SELECT e.id, s.seq, s.job_id FROM sources s
        JOIN webhook_endpoints e ON e.account_id = s.account_id AND e.disabled_at IS NULL
        WHERE p_endpoint IS NULL OR e.id = p_endpoint OR s.src_xid >= p_horizon
        RETURNING 1
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_webhook_materialize(text[], bigint[], text, xid8)") }}
