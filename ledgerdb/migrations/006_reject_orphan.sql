-- Orphan repair (issue 5, item 3): a placeholder whose workflow closed before charging it — an
-- operator terminated it, or it failed or timed out before its charge step — can never be started
-- again under its ID (the starter's REJECT_DUPLICATE reuse policy, which keeps a closed job from
-- being charged a second time on the Temporal side). Left alone it would read "submitting" forever
-- and its user would poll for ever. The reconciler rejects it instead: submitting -> rejected,
-- nothing charged (net 0, money rule 3), and the reason says why.
--
-- The guard is the state itself: only a job still submitting AND never charged is rejected, under
-- the row's lock, so a charge that races this call either commits first (the job is running and
-- this answers not_applied) or finds the job rejected and charges nothing (ledger_charge answers
-- 'rejected'). Repeating the call answers already_applied. No ledger row is written.
--
-- Per 005's rule for later migrations: SECURITY DEFINER with a pinned search_path (below), EXECUTE for
-- jobbill_app only.
CREATE FUNCTION ledger_reject_orphan(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN ledger_job_result_of('not_found', NULL, NULL, NULL::jobs);
    ELSIF j.state = 'deleted' THEN
        RETURN ledger_job_result_of('gone', NULL, NULL, j);
    ELSIF j.state = 'rejected' AND j.reject_reason = 'workflow ended before charging' THEN
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    ELSIF j.state <> 'submitting' OR j.is_charged THEN
        RETURN ledger_job_result_of('not_applied', NULL, NULL, j);
    END IF;
    UPDATE jobs SET state = 'rejected', reject_reason = 'workflow ended before charging', updated_at = now()
    WHERE id = p_job_id AND state = 'submitting' AND NOT is_charged
    RETURNING * INTO j;
    RETURN ledger_job_result_of('applied', NULL, NULL, j);
END
$$;

-- Like 005, pin search_path to the schema this migration runs in (not a hard-coded "public").
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION ledger_reject_orphan(text) SECURITY DEFINER SET search_path = %I, pg_temp',
                   current_schema());
    REVOKE ALL ON FUNCTION ledger_reject_orphan(text) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION ledger_reject_orphan(text) TO jobbill_app;
END
$$;

---- create above / drop below ----

DROP FUNCTION ledger_reject_orphan(text);
