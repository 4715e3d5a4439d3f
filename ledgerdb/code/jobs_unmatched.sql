-- Says why a guarded job transition matched no row: the job is missing, deleted, already past the
-- transition (already_applied) or not in a state it applies to (not_applied).
--
-- p_as_deleted_from judges a tombstone by the state it was deleted from (or recovered to after its
-- deletion) instead of answering gone: the steps that bill a late result (settle, reclaim) set it,
-- because a tombstone still takes its late result — a retry of the step that billed it must get
-- already_applied, the answer its first call lost. A rejected tombstone was never charged: gone.
CREATE FUNCTION ledger_job_unmatched(p_job_id text, p_done_states text[], p_as_deleted_from boolean DEFAULT false)
RETURNS ledger_job_result
LANGUAGE plpgsql STABLE AS $$
DECLARE
    j jobs;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job_id;
    IF NOT FOUND THEN
        RETURN ledger_job_result_of('not_found', NULL, NULL, NULL::jobs);
    ELSIF j.state = ANY (p_done_states) THEN
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    ELSIF j.state = 'deleted' AND p_as_deleted_from AND j.state_before_delete = ANY (p_done_states) THEN
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    ELSIF j.state = 'deleted' AND (NOT p_as_deleted_from OR j.state_before_delete = 'rejected') THEN
        RETURN ledger_job_result_of('gone', NULL, NULL, j);
    END IF;
    RETURN ledger_job_result_of('not_applied', NULL, NULL, j);
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_job_unmatched(text, text[], boolean)") }}
