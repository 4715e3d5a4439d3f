-- Records that a running job's work succeeded: running -> delivered, for a caller that knows no
-- usage: a priced job is settled at its whole hold in the same transaction, nothing released, so
-- that no release can come later, outside the exposure bound its hold was counted in while it ran.
-- (Workflows of the first version deliver with it; later ones settle.)
-- Its job.delivered event is derived later from the job's outcome_xid (ledger_webhook_derive).
CREATE FUNCTION ledger_deliver(p_job_id text, p_attempts integer)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    r ledger_job_result;
BEGIN
    r := ledger_deliver_running(p_job_id, p_attempts, NULL, NULL);
    IF r.outcome IS NULL THEN
        RETURN ledger_job_unmatched(p_job_id, ARRAY['delivered', 'recovered']);
    END IF;
    RETURN r;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_deliver(text, integer)") }}
