-- Records that a running job's work succeeded: running -> delivered, for a caller that knows no
-- usage: a priced job is settled at its whole hold in the same transaction, nothing released, so
-- that no release can come later, outside the exposure bound its hold was counted in while it ran.
-- (Workflows of the first version deliver with it; later ones settle.)
-- Its job.delivered event is derived later from the job's outcome_xid (ledger_webhook_derive).
CREATE FUNCTION ledger_deliver(p_job_id text, p_attempts integer)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    j jobs;
BEGIN
    UPDATE jobs SET state = 'delivered', delivered_at = now(), updated_at = now(), outcome_xid = pg_current_xact_id(),
                    attempts = greatest(attempts, p_attempts),
                    -- The balance this delivery saw, for its event when no release row is written.
                    balance_at_delivery = (SELECT a.balance FROM accounts a WHERE a.id = jobs.account_id)
    WHERE id = p_job_id AND state = 'running'
    RETURNING * INTO j;
    IF NOT FOUND THEN
        RETURN ledger_job_unmatched(p_job_id, ARRAY['delivered', 'recovered']);
    END IF;
    RETURN ledger_release(j, NULL, NULL, NULL, NULL);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_deliver(text, integer)") }}
