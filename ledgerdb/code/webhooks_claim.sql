-- Leases up to p_limit due deliveries to the calling worker for p_lease, and answers each with its
-- event and its endpoint's URL and secret: the delivery worker sends them outside any
-- transaction, then records each attempt (ledger_webhook_record_attempt) with the lease's token.
--
-- Several workers claim at once safely: rows another claim holds are skipped (FOR UPDATE SKIP
-- LOCKED), and a leased row is not due again until its lease runs out (a worker that died
-- mid-send loses it to the next claim: at least once). A job's later event is not due while an
-- earlier event of the same job is still pending at the same endpoint — delivered or given up
-- first — so each endpoint receives a job's events in order. p_accounts, when not NULL, limits the
-- claim to those accounts' endpoints (tests that share a ledger, as the reconcile pass's account
-- filters).
CREATE FUNCTION ledger_webhook_claim(p_limit integer, p_lease interval, p_accounts text[])
RETURNS TABLE (endpoint_id text, event_seq bigint, lease_token uuid, attempt integer, queued_at timestamptz,
               event_id text, event_type text, payload jsonb, event_created_at timestamptz,
               url text, secret text)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
#variable_conflict use_column
DECLARE
    token uuid := gen_random_uuid();
BEGIN
    IF p_limit < 1 OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'claim: limit % and lease % must be above zero', p_limit, p_lease USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT d.endpoint_id, d.event_seq FROM webhook_deliveries d
        JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.disabled_at IS NULL
             AND (p_accounts IS NULL OR e.account_id = ANY (p_accounts))
        WHERE d.status = 'pending' AND d.next_attempt_at <= now()
          AND (d.leased_until IS NULL OR d.leased_until <= now())
          AND (d.job_id IS NULL OR NOT EXISTS (
                SELECT 1 FROM webhook_deliveries p
                WHERE p.endpoint_id = d.endpoint_id AND p.job_id = d.job_id
                  AND p.status = 'pending' AND p.event_seq < d.event_seq))
        ORDER BY d.next_attempt_at, d.event_seq
        LIMIT p_limit
        FOR UPDATE OF d SKIP LOCKED
    ), leased AS (
        UPDATE webhook_deliveries d SET leased_until = now() + p_lease, lease_token = token, attempts = d.attempts + 1
        FROM due
        WHERE d.endpoint_id = due.endpoint_id AND d.event_seq = due.event_seq
        RETURNING d.endpoint_id, d.event_seq, d.lease_token, d.attempts, d.queued_at
    )
    SELECT l.endpoint_id, l.event_seq, l.lease_token, l.attempts, l.queued_at,
           ev.id, ev.type, ev.payload, ev.created_at, e.url, e.secret
    FROM leased l
    JOIN webhook_events ev ON ev.seq = l.event_seq
    JOIN webhook_endpoints e ON e.id = l.endpoint_id
    ORDER BY l.event_seq;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_webhook_claim(integer, interval, text[])") }}
