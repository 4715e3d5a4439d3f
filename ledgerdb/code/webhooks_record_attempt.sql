-- Records one attempt to send a delivery claimed with p_token, in the delivery log and on the
-- delivery, and answers what became of the delivery: delivered (p_delivered: the receiver
-- answered 2xx), retry (due again after p_retry_in) or failed (the retry would come more than
-- p_max_age after the delivery became sendable: given up, logged, and no longer holding back the
-- job's later events). The database's clock decides, as it decides when a delivery is due.
--
-- A delivery becomes sendable when it is queued (the event, or its replay) or, if it waited in
-- line behind an earlier event of its job at the same endpoint, when the last such event was
-- delivered or given up, whichever is later: waiting in line, when it cannot even be sent, uses
-- up none of its max age. The bound stays a bound: the clock restarts only when an earlier event
-- of the same job finishes, and a job has few events (more only by a replay, which gives a new
-- round of max age anyway).
--
-- A worker whose lease ran out (another worker claimed the delivery since) still logs its attempt;
-- its success still marks the delivery delivered, but its failure leaves the delivery to the lease
-- holder (lease_lost). Likewise an attempt in flight when its endpoint was deleted: taken by the
-- receiver, its delivery ends delivered, not cancelled — the event did arrive, as the log says —
-- and refused, it stays cancelled, never retried (already_applied).
CREATE FUNCTION ledger_webhook_record_attempt(p_endpoint_id text, p_event_seq bigint, p_token uuid, p_attempt integer,
                                              p_delivered boolean, p_http_status integer, p_error text, p_duration_ms integer,
                                              p_retry_in interval, p_max_age interval)
RETURNS text
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    d       webhook_deliveries;
    outcome text;
    next_at timestamptz;
    since   timestamptz;
BEGIN
    SELECT * INTO d FROM webhook_deliveries WHERE endpoint_id = p_endpoint_id AND event_seq = p_event_seq FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    IF p_delivered THEN
        outcome := 'delivered';
    ELSE
        -- When it became sendable: greatest() passes over the NULL of a job with no earlier event
        -- here (or of balance.low, which has no job). Found through the job's events (their index)
        -- and the deliveries' key, so it reads a handful of rows however busy the endpoint.
        SELECT greatest(d.queued_at, max(p.finished_at)) INTO since
        FROM webhook_events ev
        JOIN webhook_deliveries p ON p.endpoint_id = d.endpoint_id AND p.event_seq = ev.seq
        WHERE ev.job_id = d.job_id AND ev.seq < d.event_seq;
        IF now() + p_retry_in - since > p_max_age THEN
            outcome := 'failed';
        ELSE
            outcome := 'retry';
            next_at := now() + p_retry_in;
        END IF;
    END IF;
    INSERT INTO webhook_attempts (endpoint_id, event_seq, attempt, http_status, error, duration_ms, outcome, next_attempt_at)
    VALUES (p_endpoint_id, p_event_seq, p_attempt, p_http_status, left(p_error, 500), greatest(p_duration_ms, 0), outcome,
            CASE WHEN d.lease_token IS NOT DISTINCT FROM p_token THEN next_at END);
    IF d.status = 'cancelled' AND p_delivered THEN
        -- Deleting the endpoint stopped what was queued for it, not what had already reached it.
        UPDATE webhook_deliveries SET status = 'delivered', last_attempt_at = now(), finished_at = now()
        WHERE endpoint_id = p_endpoint_id AND event_seq = p_event_seq;
        RETURN outcome;
    ELSIF d.status <> 'pending' THEN
        RETURN 'already_applied';
    ELSIF d.lease_token IS DISTINCT FROM p_token AND NOT p_delivered THEN
        RETURN 'lease_lost';
    END IF;
    UPDATE webhook_deliveries
    SET status = CASE outcome WHEN 'retry' THEN 'pending' ELSE outcome END,
        next_attempt_at = coalesce(next_at, next_attempt_at),
        leased_until = NULL, lease_token = NULL, last_attempt_at = now(),
        finished_at = CASE outcome WHEN 'retry' THEN NULL ELSE now() END
    WHERE endpoint_id = p_endpoint_id AND event_seq = p_event_seq;
    RETURN outcome;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_webhook_record_attempt(text, bigint, uuid, integer, boolean, integer, text, integer, interval, interval)") }}
