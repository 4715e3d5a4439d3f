-- Queues events of the endpoint's account to the endpoint again: the one event p_event_id, or
-- every event since p_since (exactly one of the two). Each is due at once and gets a new round of
-- max_age; a delivery still pending stays as it is. Answers the outcome and how many deliveries
-- were queued: applied, not_found (no such endpoint), disabled (a deleted endpoint),
-- unknown_event (no event of this ID in the endpoint's account); nothing is written but on applied.
CREATE FUNCTION ledger_webhook_replay(p_endpoint_id text, p_event_id text, p_since timestamptz)
RETURNS TABLE (outcome text, queued integer)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    e webhook_endpoints;
    n integer;
BEGIN
    IF (p_event_id IS NULL) = (p_since IS NULL) THEN
        RAISE EXCEPTION 'replay: give an event ID or a time, not both or neither' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO e FROM webhook_endpoints WHERE id = p_endpoint_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, 0;
        RETURN;
    ELSIF e.disabled_at IS NOT NULL THEN
        RETURN QUERY SELECT 'disabled'::text, 0;
        RETURN;
    ELSIF p_event_id IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM webhook_events ev WHERE ev.id = p_event_id AND ev.account_id = e.account_id) THEN
        RETURN QUERY SELECT 'unknown_event'::text, 0;
        RETURN;
    END IF;
    INSERT INTO webhook_deliveries AS d (endpoint_id, event_seq, job_id)
    SELECT e.id, ev.seq, ev.job_id FROM webhook_events ev
    WHERE ev.account_id = e.account_id
      AND (ev.id = p_event_id OR ev.created_at >= p_since)
    ORDER BY ev.seq
    ON CONFLICT (endpoint_id, event_seq) DO UPDATE
        SET status = 'pending', queued_at = now(), next_attempt_at = now(), finished_at = NULL,
            leased_until = NULL, lease_token = NULL
        WHERE d.status <> 'pending';
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN QUERY SELECT 'applied'::text, n;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_webhook_replay(text, text, timestamptz)") }}
