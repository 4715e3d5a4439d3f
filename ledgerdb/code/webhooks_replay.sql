-- Queues events of the endpoint's account to the endpoint again: the one event p_event_id, or
-- every event since p_since (exactly one of the two). Each is due at once and gets a new round of
-- max_age; a delivery still pending stays as it is. Answers the outcome and how many deliveries
-- were queued: applied, not_found (no such endpoint), disabled (a deleted endpoint),
-- unknown_event (no event of this ID in the endpoint's account); nothing is written but on applied.
--
-- Events are derived only while an account has an endpoint (ledger_webhook_derive), so a replay
-- since a time first derives those of the account's transitions since then that no pass wrote (from
-- before its first endpoint, or not yet reached by the cursor) and queues them
-- (ledger_webhook_materialize): a replay sends every event of the account since the time, as the
-- rows tell it. Rows written by the old outbox's time have their events already.
--
-- It derives only its own account's committed rows and never takes the derive pass's lock, nor
-- moves the cursor: a customer's replays, however many are in flight, can never make a pass skip
-- (a pass only tries the lock) and so hold every other account's events back. A pass deriving the
-- same job at the same time is harmless: events are unique per job and type, both write a job's
-- events in the same order, and whichever writes an event queues it (an event at or above the
-- cursor read here to every endpoint, as the pass would). Its top-up requests come last
-- (ledger_webhook_materialize_topups), under its own account's rule row only: a pass deriving the
-- same account waits for that step alone, and the two never ask past the month's cap together.
CREATE FUNCTION ledger_webhook_replay(p_endpoint_id text, p_event_id text, p_since timestamptz)
RETURNS TABLE (outcome text, queued integer)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    e       webhook_endpoints;
    n       integer;
    horizon xid8;
    entries bigint[];
    derived integer := 0;
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
    IF p_since IS NOT NULL THEN
        SELECT c.horizon INTO horizon FROM webhook_derive_cursor c;
        -- Each event written here is queued to this endpoint: counted among those replayed.
        entries := ARRAY(SELECT le.id FROM ledger_entries le
                         WHERE le.account_id = e.account_id AND le.created_at >= p_since AND le.xid IS NOT NULL
                           AND (le.amount < 0 OR le.kind = 'grant'));
        derived := ledger_webhook_materialize(
            ARRAY(SELECT DISTINCT le.job_id FROM ledger_entries le
                  WHERE le.account_id = e.account_id AND le.created_at >= p_since AND le.xid IS NOT NULL
                    AND le.kind IN ('charge', 'refund', 'reclaim')
                  UNION
                  SELECT j.id FROM jobs j
                  WHERE j.account_id = e.account_id AND j.outcome_xid IS NOT NULL
                    -- By the transition's own time: updated_at moves later (a delete).
                    AND coalesce(j.rejected_at, j.delivered_at) >= p_since),
            entries, e.id, horizon);
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
    IF p_since IS NOT NULL THEN
        -- Last: the account's rule row is held from here to the commit (see above).
        derived := derived + ledger_webhook_materialize_topups(entries, e.id, horizon);
    END IF;
    RETURN QUERY SELECT 'applied'::text, n + derived;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_webhook_replay(text, text, timestamptz)") }}
