-- Records that a running job's work succeeded: running -> delivered, for a caller that knows no
-- usage: a priced job is settled at its whole hold in the same transaction, nothing released, so
-- that no release can come later, outside the exposure bound its hold was counted in while it ran.
-- (Workflows of the first version deliver with it; later ones settle.)
-- Applied, it writes job.delivered in the same transaction (ledger_emit_event).
CREATE FUNCTION ledger_deliver(p_job_id text, p_attempts integer)
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
    IF NOT FOUND THEN
        RETURN ledger_job_unmatched(p_job_id, ARRAY['delivered', 'recovered']);
    END IF;
    r := ledger_release(j, NULL, NULL, NULL);
    PERFORM ledger_emit_job_event('job.delivered', r.job, coalesce(r.balance_after, (SELECT balance FROM accounts WHERE id = j.account_id)));
    RETURN r;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_deliver(text, integer)") }}
