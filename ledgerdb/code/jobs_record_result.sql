-- Writes a reported result to the inbox before anyone acknowledges it: once per job and attempt.
-- The same report again answers already_applied; another output or usage for the same attempt,
-- conflict.
-- A job that was never charged (submitting, rejected) has no work to deliver: not_started. A
-- tombstone takes a result only while its refund can still be reclaimed (a refunded job deleted):
-- deletion never cancels what delivered work costs; any other tombstone is gone, but for a repeat
-- of a report it took.
CREATE FUNCTION ledger_record_result(p_job_id text, p_attempt integer, p_output_ref text, p_finished_at timestamptz,
                                     p_units_used bigint)
RETURNS TABLE (outcome text, job_state text, received_at timestamptz, applied_at timestamptz)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    j  jobs;
    rr result_reports;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::text, NULL::timestamptz, NULL::timestamptz;
        RETURN;
    ELSIF j.state = 'deleted' AND NOT (j.is_refunded AND NOT j.is_reclaimed) THEN
        -- A repeat of a report it took before answers as a repeat does; anything new is gone.
        SELECT * INTO rr FROM result_reports r
        WHERE r.job_id = p_job_id AND r.attempt = p_attempt AND r.output_ref = p_output_ref
          AND r.units_used IS NOT DISTINCT FROM p_units_used;
        IF FOUND THEN
            RETURN QUERY SELECT 'already_applied'::text, j.state, rr.received_at, rr.applied_at;
        ELSE
            RETURN QUERY SELECT 'gone'::text, j.state, NULL::timestamptz, NULL::timestamptz;
        END IF;
        RETURN;
    ELSIF NOT j.is_charged THEN
        RETURN QUERY SELECT 'not_started'::text, j.state, NULL::timestamptz, NULL::timestamptz;
        RETURN;
    END IF;
    INSERT INTO result_reports (job_id, attempt, output_ref, finished_at, units_used)
    VALUES (p_job_id, p_attempt, p_output_ref, p_finished_at, p_units_used)
    ON CONFLICT (job_id, attempt) DO NOTHING
    RETURNING * INTO rr;
    IF FOUND THEN
        RETURN QUERY SELECT 'applied'::text, j.state, rr.received_at, rr.applied_at;
        RETURN;
    END IF;
    SELECT * INTO rr FROM result_reports r WHERE r.job_id = p_job_id AND r.attempt = p_attempt;
    IF rr.output_ref <> p_output_ref OR rr.units_used IS DISTINCT FROM p_units_used THEN
        RETURN QUERY SELECT 'conflict'::text, j.state, rr.received_at, rr.applied_at;
    ELSE
        RETURN QUERY SELECT 'already_applied'::text, j.state, rr.received_at, rr.applied_at;
    END IF;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_record_result(text, integer, text, timestamptz, bigint)") }}
