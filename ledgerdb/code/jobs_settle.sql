-- Bills a job's result in one transaction, whatever happened before it landed: a running job is
-- delivered; a refunded one is recovered (its refund reclaimed, the debt rule applies). A job with
-- a price (a kind) is settled in the same transaction: its units used are recorded, capped at the
-- units its charge held (the hold is a hard spending cap), and the unused part of the hold goes
-- back in one release row. p_units_used NULL means the runner did not say: the job is settled at
-- its whole hold. p_output_ref, the output of the result, is kept on the job (NULL: none known).
-- A settled job answers already_applied with the units and output it was settled at. A deleted
-- refunded job is recovered as a tombstone (ledger_recover) and settled, its output not
-- kept: deletion hid the job's content, not what it owes; any other tombstone answers as the state
-- it was deleted from (already_applied once settled). One step, so that a result that races a
-- refund can never be lost between a reclaim and a delivery.
-- Its webhook events (job.delivered from the job's outcome_xid; job.reclaimed and balance.low from
-- the reclaim row) are derived later (ledger_webhook_derive): nothing more is written here.
CREATE FUNCTION ledger_settle(p_job_id text, p_attempts integer, p_units_used bigint, p_output_ref text DEFAULT NULL)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    r ledger_job_result;
BEGIN
    IF p_units_used < 0 THEN
        RAISE EXCEPTION 'job %: units used is %; it must not be negative', p_job_id, p_units_used
            USING ERRCODE = '22023';
    END IF;
    r := ledger_deliver_running(p_job_id, p_attempts, p_units_used, p_output_ref);
    IF r.outcome IS NOT NULL THEN
        RETURN r;
    END IF;
    -- Not running: a refunded job is recovered and settled (ledger_recover).
    RETURN ledger_recover(p_job_id, p_units_used, p_output_ref, ARRAY['delivered', 'recovered']);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_settle(text, integer, bigint, text)") }}
