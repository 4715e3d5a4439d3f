-- Turns a settled job into a tombstone: its ID can never be submitted or charged again. Refused
-- while the job is submitting or running: those rows are the evidence for reconciliation. A
-- refunded job deleted can no longer be reclaimed (a late result for it is discarded), so its cost
-- stops awaiting a reclaim.
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
    IF j.state_before_delete = 'refunded' THEN
        UPDATE accounts a SET awaiting_reclaim = a.awaiting_reclaim - j.cost, updated_at = now()
        WHERE a.id = j.account_id;
    END IF;
    RETURN ledger_job_result_of('applied', NULL, NULL, j);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_delete(text)") }}
