-- Gives back a running job's charge when its work failed for good, timed out, or was stopped by an
-- operator (a heal): running -> refunded. The refunded cost now awaits a possible reclaim. The
-- credits go back to the blocks the charge drew them from, and pay the account's debt first if it
-- has one (the debt rule).
-- p_reason_code is what the customer is told (a code of the vocabulary the column's CHECK lists);
-- p_detail is the operator's words, already scrubbed of credentials by the caller.
-- Its job.refunded event is derived later from the refund row (ledger_webhook_derive).
CREATE FUNCTION ledger_refund(p_job_id text, p_reason_code text, p_detail text, p_attempts integer)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    r         ledger_job_result;
    returned  bigint;
    any_ended boolean;
    in_debt   boolean;
BEGIN
    -- The job under its guard, then its account, locked in one statement (job before account, as
    -- in every transition), so that the refund's statement below takes its snapshot after the
    -- charge it gives back committed, and sees where the charge took its credits from.
    PERFORM 1 FROM accounts a
    WHERE a.id = (SELECT account_id FROM jobs
                  WHERE id = p_job_id AND state = 'running' AND is_charged AND NOT is_refunded
                  FOR UPDATE)
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN ledger_job_unmatched(p_job_id, ARRAY['refunded', 'recovered']);
    END IF;

    -- One statement, its guard the FIRST CTE (every CTE runs to completion whatever the later ones
    -- find): the job, the credit, its row, and the credits back to the blocks the job's charge drew
    -- them from (block_return_to_charge).
    WITH refunded AS (
        UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), updated_at = now(),
                        refund_reason_code = p_reason_code, refund_reason = p_detail, attempts = greatest(attempts, p_attempts),
                        attempts_at_refund = greatest(attempts, p_attempts)
        WHERE id = p_job_id AND state = 'running' AND is_charged AND NOT is_refunded
        RETURNING jobs AS job
    ), credit AS (
        -- The amount is the job's recorded cost, never a caller's number (the price-list rule).
        UPDATE accounts a SET balance = a.balance + (j.job).cost, awaiting_reclaim = a.awaiting_reclaim + (j.job).cost,
                              updated_at = now()
        FROM refunded j
        WHERE a.id = (j.job).account_id
        RETURNING a.balance
    ), entry AS (
        INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
        SELECT (j.job).account_id, (j.job).id, 'refund', (j.job).cost, c.balance FROM refunded j, credit c
        RETURNING id, account_id, amount, balance_after
    ), {{ template "block_return_to_charge" }}
    SELECT 'applied', e.id, e.balance_after, j.job,
           {{ template "block_return_outcome" }}
    INTO r.outcome, r.entry_id, r.balance_after, r.job, returned, any_ended, in_debt
    FROM refunded j, entry e;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job %: refund guard lost under its own lock', p_job_id USING ERRCODE = 'JB003';
    END IF;
    -- The rare rest: what landed in an expired block expires with it, and what came back to the
    -- others pays the account's debt first.
    IF (returned < (r.job).cost OR any_ended OR in_debt)
       AND ledger_block_return_rest((r.job).account_id, r.entry_id, (r.job).cost - returned, any_ended, in_debt) > 0 THEN
        SELECT a.balance INTO r.balance_after FROM accounts a WHERE a.id = (r.job).account_id;
    END IF;
    RETURN r;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_refund(text, text, text, integer)") }}
