-- Records how many attempts the work of a running or refunded job has had; the count only grows.
CREATE FUNCTION ledger_record_attempt(p_job_id text, p_attempts integer)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    j jobs;
BEGIN
    UPDATE jobs SET attempts = p_attempts, updated_at = now()
    WHERE id = p_job_id AND state IN ('running', 'refunded') AND attempts < p_attempts
    RETURNING * INTO j;
    IF FOUND THEN
        RETURN ledger_job_result_of('applied', NULL, NULL, j);
    END IF;
    SELECT * INTO j FROM jobs WHERE id = p_job_id;
    IF NOT FOUND THEN
        RETURN ledger_job_result_of('not_found', NULL, NULL, NULL::jobs);
    ELSIF j.state = 'deleted' THEN
        RETURN ledger_job_result_of('gone', NULL, NULL, j);
    ELSIF j.state IN ('running', 'refunded') THEN
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    END IF;
    RETURN ledger_job_result_of('not_applied', NULL, NULL, j);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_record_attempt(text, integer)") }}
