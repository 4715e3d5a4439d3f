-- Bills a job's result in one transaction, whatever happened before it landed: a running job is
-- delivered (no money moves); a refunded one is recovered (its refund reclaimed, the debt rule
-- applies). A delivered or recovered job answers already_applied. One step, so that a result that
-- races a refund can never be lost between a reclaim and a delivery.
CREATE FUNCTION ledger_settle(p_job_id text, p_attempts integer)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    j jobs;
    r ledger_job_result;
BEGIN
    UPDATE jobs SET state = 'delivered', delivered_at = now(), updated_at = now(),
                    attempts = greatest(attempts, p_attempts)
    WHERE id = p_job_id AND state = 'running'
    RETURNING * INTO j;
    IF FOUND THEN
        RETURN ledger_job_result_of('applied', NULL, NULL, j);
    END IF;
    r := ledger_reclaim(p_job_id);
    IF r.outcome = 'applied' THEN
        RETURN r;
    END IF;
    RETURN ledger_job_unmatched(p_job_id, ARRAY['delivered', 'recovered']);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_settle(text, integer)") }}
