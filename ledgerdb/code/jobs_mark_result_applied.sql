-- Marks a recorded result as taken by the job's workflow or the late-result fallback, once.
CREATE FUNCTION ledger_mark_result_applied(p_job_id text, p_attempt integer, p_via text)
RETURNS text
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
BEGIN
    UPDATE result_reports SET applied_at = now(), applied_via = p_via
    WHERE job_id = p_job_id AND attempt = p_attempt AND applied_at IS NULL;
    IF FOUND THEN
        RETURN 'applied';
    END IF;
    PERFORM 1 FROM result_reports WHERE job_id = p_job_id AND attempt = p_attempt;
    IF FOUND THEN
        RETURN 'already_applied';
    END IF;
    RETURN 'not_found';
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_mark_result_applied(text, integer, text)") }}
