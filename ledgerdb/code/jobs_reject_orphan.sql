-- Rejects a placeholder that no workflow can ever charge (submitting -> rejected, nothing charged,
-- no row): its workflow closed before charging it (p_reason workflow_ended_before_charging), or its
-- workflow ID is held by a workflow that is not its own (workflow_id_taken). The guard is the state
-- itself, under the row's lock: a charge that raced this call either committed first (not_applied)
-- or finds the job rejected and charges nothing.
-- Its job.rejected event is derived later from the job's outcome_xid (ledger_webhook_derive).
CREATE FUNCTION ledger_reject_orphan(p_job_id text, p_reason text)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    j jobs;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN ledger_job_result_of('not_found', NULL, NULL, NULL::jobs);
    ELSIF j.state = 'deleted' THEN
        RETURN ledger_job_result_of('gone', NULL, NULL, j);
    ELSIF j.state = 'rejected' THEN
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    ELSIF j.state <> 'submitting' OR j.is_charged THEN
        RETURN ledger_job_result_of('not_applied', NULL, NULL, j);
    END IF;
    UPDATE jobs SET state = 'rejected', reject_reason = p_reason, updated_at = now(), rejected_at = now(), outcome_xid = pg_current_xact_id()
    WHERE id = p_job_id AND state = 'submitting' AND NOT is_charged
    RETURNING * INTO j;
    RETURN ledger_job_result_of('applied', NULL, NULL, j);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_reject_orphan(text, text)") }}
