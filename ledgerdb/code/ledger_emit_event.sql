-- Writes one webhook event, inside the caller's transaction: the one way an event is written, so
-- that an event exists exactly when the money transition that called it commits (and an
-- idempotent replay of the transition, which writes no ledger row, calls it not at all). The event
-- is queued in the same transaction for every enabled endpoint of the account; an endpoint made
-- later receives it only when it is replayed to it. p_job_id is the job's key, NULL for an event
-- about the account (balance.low).
CREATE FUNCTION ledger_emit_event(p_account_id text, p_job_id text, p_type text, p_payload jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    event_seq bigint;
BEGIN
    INSERT INTO webhook_events (id, account_id, job_id, type, payload)
    VALUES ('msg_' || replace(gen_random_uuid()::text, '-', ''), p_account_id, p_job_id, p_type, p_payload)
    RETURNING seq INTO event_seq;
    INSERT INTO webhook_deliveries (endpoint_id, event_seq, job_id)
    SELECT e.id, event_seq, p_job_id FROM webhook_endpoints e
    WHERE e.account_id = p_account_id AND e.disabled_at IS NULL;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_emit_event(text, text, text, jsonb)") }}
