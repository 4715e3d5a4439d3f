-- The enabled endpoints of p_account_id that a new event of its is queued to: every one — or,
-- when p_endpoint is given (a replay to that endpoint), only it when the event's transaction
-- (p_src_xid) is below p_horizon, the derive cursor (a pass read it already and found no endpoint
-- wanting it then); an event at or above the horizon is one the next pass would have queued for
-- every endpoint, so it still is.
CREATE FUNCTION ledger_webhook_queue_to(p_account_id text, p_src_xid xid8, p_endpoint text, p_horizon xid8)
RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT e.id FROM webhook_endpoints e
    WHERE e.account_id = p_account_id AND e.disabled_at IS NULL
      AND (p_endpoint IS NULL OR e.id = p_endpoint OR p_src_xid >= p_horizon)
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_webhook_queue_to(text, xid8, text, xid8)") }}

-- Writes the webhook events of the given jobs (every event their committed rows make,
-- ledger_webhook_job_events, in each job's order) and the account's events of the given ledger
-- rows but top-up requests (ledger_webhook_materialize_topups), skipping any already written, and
-- queues each new event for delivery (ledger_webhook_queue_to); answers how many events it wrote.
-- Called by the derive pass and by a replay, outside any money transaction.
--
-- A job's events are always written all together, earliest first, so that a job's later event can
-- never get a lower seq than its earlier one, even when the later transition's transaction ID is
-- the older one and is read first: every event of the job committed by then is written with it.
--
-- The account's events of a row (p_entries: the rows the caller read that may make one — grants
-- and debits), each unique per row and type:
--
-- credit.granted: a grant row that made a credit block (grants from before the blocks began made
-- none), with the block's terms, which a grant fixes once.
--
-- credit.expired: an expire row — the expiry pass's, or one a refund or a release caused by
-- returning credits to a block already past its expiry (caused_by), which names that row's job.
--
-- balance.low: a debit (a charge, a reclaim, a negative adjustment, an expiry) that took the
-- balance from at or above the account's threshold to below it, the reclaim measured after the
-- release written with it; the threshold is the account's when the event is derived. An expiry a
-- return caused is not one: with its return, it never lowers the balance below where it stood
-- before (it removes no more than came back). A debit of the moment the derived outbox replaced
-- the old one may have its balance.low written already by the old code, which kept no entry_id:
-- the same account at the same transaction time is that event.
CREATE FUNCTION ledger_webhook_materialize(p_jobs text[], p_entries bigint[], p_endpoint text, p_horizon xid8)
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
        SELECT g.account_id, NULL, g.id, 'credit.granted', 0, g.xid, g.created_at, jsonb_build_object(
            'account_id', g.account_id,
            'block_id', b.id,
            'category', b.category,
            'priority', b.priority,
            'amount', g.amount,
            'effective_at', ledger_webhook_time(b.effective_at),
            'expires_at', ledger_webhook_time(b.expires_at),
            -- A decimal, as text: a JSON number would be read as a float.
            'cost_basis', trim_scale(b.cost_basis)::text,
            'memo', g.memo,
            'balance_after', g.balance_after)
        FROM ledger_entries g
        JOIN credit_blocks b ON b.id = g.block_id
        WHERE g.id = ANY (p_entries) AND g.kind = 'grant'
        UNION ALL
        SELECT x.account_id, NULL, x.id, 'credit.expired', 0, x.xid, x.created_at, jsonb_build_object(
            'account_id', x.account_id,
            'block_id', b.id,
            'category', b.category,
            'amount', -x.amount,
            'expires_at', ledger_webhook_time(b.expires_at),
            -- What removed the credits: the block's expiry, or a refund or a release that
            -- returned them to it after it had expired (and the job it was for).
            'cause', coalesce(c.kind, 'expiry'),
            'job_id', CASE WHEN c.job_id IS NULL THEN NULL ELSE substr(c.job_id, char_length(c.account_id) + 2) END,
            'balance_after', x.balance_after)
        FROM ledger_entries x
        JOIN credit_blocks b ON b.id = x.block_id
        LEFT JOIN ledger_entries c ON c.id = x.caused_by
        WHERE x.id = ANY (p_entries) AND x.kind = 'expire'
        UNION ALL
        SELECT d.account_id, NULL, d.id, 'balance.low', 1, d.xid, d.created_at, jsonb_build_object(
            'account_id', d.account_id,
            'balance', a.after,
            'threshold', t.threshold,
            'job_id', CASE WHEN d.job_id IS NULL THEN NULL ELSE substr(d.job_id, char_length(d.account_id) + 2) END)
        FROM ledger_entries d
        JOIN webhook_low_balance t ON t.account_id = d.account_id
        CROSS JOIN LATERAL (SELECT coalesce((SELECT r.balance_after FROM ledger_entries r
                                             WHERE d.kind = 'reclaim' AND r.job_id = d.job_id AND r.kind = 'release'),
                                            d.balance_after) AS after) a
        WHERE d.id = ANY (p_entries) AND d.amount < 0 AND d.caused_by IS NULL
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
        SELECT q.id, s.seq, s.job_id FROM sources s
        CROSS JOIN LATERAL ledger_webhook_queue_to(s.account_id, s.src_xid, p_endpoint, p_horizon) q (id)
        RETURNING 1
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_webhook_materialize(text[], bigint[], text, xid8)") }}

-- Writes the topup.requested events the given rows ask for (ledger_topup_requests) and queues
-- each as ledger_webhook_materialize queues its events; answers how many it wrote. Called by the
-- derive pass and by a replay, each after its other events, as the last thing it writes.
--
-- topup.requested: a spend (ledger_topup_amount: a charge, a reclaim, a negative adjustment, an
-- expiry by the expiry pass — never a credit, nor an expiry a return caused) made at or after the
-- account's automatic top-up rule was made, that took the balance from at or above the rule's
-- threshold to below it, within the month's cap. The rule is the account's as it stands when the
-- event is derived. Its idempotency key is the one the product's payment code posts the paid
-- grant with, so a redelivered event never buys credits twice; it names the cap it was asked
-- within, which the audit checks the month's requests against.
--
-- Why two derivations never ask past the cap together: a pass and any number of replays may
-- derive the same account at once, each reading a different set of its debits. Each takes the
-- account's rule row (FOR UPDATE, as ledger_topup_set_rule does) before it reads anything, in a
-- statement of its own: the statement after it reads in a new snapshot (this function is VOLATILE,
-- and runs at read committed, which it checks), which holds every request another derivation
-- wrote before it let the rule go at its commit. A snapshot taken before the lock — the caller's
-- statement's, or a STABLE function's — would not. Only the accounts whose rule it holds get
-- requests: a rule made after the lock was taken judges debits that committed before it did.
--
-- Deadlocks: whoever holds an account's rule row here writes only that account's requests, which
-- no one else may write, and their deliveries (new rows): it waits for no one, so no cycle can
-- run through the rule rows. Passes take them in account order. A replay holds only its own
-- account's, for the length of this function, and a pass that waits for it holds other accounts'
-- events back that long at most: never for a replay's whole history (a replay takes the rule last).
CREATE FUNCTION ledger_webhook_materialize_topups(p_entries bigint[], p_endpoint text, p_horizon xid8)
RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    held     text[];
    n        integer;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'top-up requests are derived at read committed only, not %: the month''s cap must be counted after the account''s rule is held',
            current_setting('transaction_isolation') USING ERRCODE = '25000';
    END IF;
    held := ARRAY(
        SELECT t.account_id FROM topup_rules t
        WHERE t.account_id IN (SELECT le.account_id FROM ledger_entries le
                               WHERE le.id = ANY (p_entries) AND le.amount < 0 AND le.caused_by IS NULL)
        ORDER BY t.account_id
        FOR UPDATE);
    IF cardinality(held) = 0 THEN
        RETURN 0;
    END IF;
    WITH derived AS (
        SELECT d.account_id, d.id AS entry_id, d.xid AS src_xid, d.created_at AS at, jsonb_build_object(
            'account_id', d.account_id,
            'amount', r.amount,
            'idempotency_key', 'topup-' || d.id,
            'mode', t.mode,
            'threshold', t.threshold,
            'monthly_cap', t.monthly_cap,
            'balance', coalesce((SELECT x.balance_after FROM ledger_entries x
                                 WHERE d.kind = 'reclaim' AND x.job_id = d.job_id AND x.kind = 'release'), d.balance_after),
            'job_id', CASE WHEN d.job_id IS NULL THEN NULL ELSE substr(d.job_id, char_length(d.account_id) + 2) END) AS payload
        FROM ledger_topup_requests(p_entries, held) r
        JOIN ledger_entries d ON d.id = r.entry_id
        JOIN topup_rules t ON t.account_id = d.account_id
    ), written AS (
        INSERT INTO webhook_events (id, account_id, entry_id, type, payload, created_at)
        SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), account_id, entry_id, 'topup.requested', payload, at
        FROM derived
        ORDER BY entry_id
        ON CONFLICT DO NOTHING
        RETURNING seq, account_id, entry_id
    ), queued AS (
        INSERT INTO webhook_deliveries (endpoint_id, event_seq)
        SELECT q.id, w.seq FROM written w JOIN derived d ON d.entry_id = w.entry_id
        CROSS JOIN LATERAL ledger_webhook_queue_to(w.account_id, d.src_xid, p_endpoint, p_horizon) q (id)
        RETURNING 1
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_webhook_materialize_topups(bigint[], text, xid8)") }}
