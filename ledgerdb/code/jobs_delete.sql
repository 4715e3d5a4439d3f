-- Turns a settled job into a tombstone: its ID can never be submitted or charged again. Refused
-- while the job is submitting or running: those rows are the evidence for reconciliation.
-- Deleting removes a job's content from view, never an obligation: a refunded job deleted still
-- takes its late result (ledger_recover reclaims the tombstone's refund), so its cost stays
-- awaiting a reclaim on the account, as every refunded job's does.
CREATE FUNCTION ledger_delete(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    j jobs;
BEGIN
    UPDATE jobs SET state = 'deleted', state_before_delete = state, deleted_at = now(), updated_at = now()
    WHERE id = p_job_id AND state IN ('rejected', 'delivered', 'refunded', 'recovered')
    RETURNING * INTO j;
    IF NOT FOUND THEN
        RETURN ledger_job_unmatched(p_job_id, ARRAY['deleted']);
    END IF;
    RETURN ledger_job_result_of('applied', NULL, NULL, j);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_delete(text)") }}
