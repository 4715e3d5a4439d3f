-- Charges a submitted job its recorded cost: submitting -> running, or -> rejected when the
-- account cannot pay (nothing charged). With a fingerprint, a job submitted with another request
-- answers conflict and nothing changes (a workflow started directly under a job's ID bills only
-- its own request).
-- Its webhook events (job.charged, balance.low, job.rejected) are derived later from the charge
-- row, and from the rejected job's outcome_xid (ledger_webhook_derive): nothing more is written here.
CREATE FUNCTION ledger_charge(p_job_id text, p_fingerprint bytea)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    r      ledger_job_result;
    j      jobs;
    drawn  bigint;
    reason text;
BEGIN
    -- The job under its guard, then its account, locked in one statement (job before account, as
    -- in every transition, so that none can wait on another in a cycle), so that the charge's
    -- statement below takes its snapshot with both held and reads the account's blocks as they
    -- stand: every writer of an account's blocks holds the account's lock.
    PERFORM 1 FROM accounts a
    WHERE a.id = (SELECT account_id FROM jobs
                  WHERE id = p_job_id AND state = 'submitting' AND NOT is_charged
                    AND (p_fingerprint IS NULL OR request_fingerprint = p_fingerprint)
                  FOR UPDATE)
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        -- Say why nothing can be charged.
        SELECT * INTO j FROM jobs WHERE id = p_job_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN ledger_job_result_of('not_found', NULL, NULL, NULL::jobs);
        ELSIF j.state = 'deleted' THEN
            RETURN ledger_job_result_of('gone', NULL, NULL, j);
        ELSIF p_fingerprint IS NOT NULL AND j.request_fingerprint <> p_fingerprint THEN
            RETURN ledger_job_result_of('conflict', NULL, NULL, j);
        ELSIF j.state = 'rejected' THEN
            RETURN ledger_job_result_of('rejected', NULL, NULL, j);
        ELSIF j.is_charged THEN
            RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
        END IF;
        -- Chargeable after all: its row was written after the first statement's snapshot. Its
        -- lock is held now; take its account's as that statement would have.
        PERFORM 1 FROM accounts a WHERE a.id = j.account_id FOR NO KEY UPDATE;
    END IF;

    -- One statement: the debit is the FIRST CTE and the only one with a condition (every CTE runs
    -- to completion whatever the later ones find, so a condition in a later one would not undo an
    -- earlier write); the job, its row and the draw from its blocks hang off it. The debit keeps
    -- the account's lower exposure in range (ledger_max_balance), and takes only what the
    -- spendable blocks cover.
    WITH debit AS (
        UPDATE accounts a SET balance = a.balance - t.cost, updated_at = now()
        FROM jobs t
        WHERE t.id = p_job_id AND t.state = 'submitting' AND NOT t.is_charged
          AND a.id = t.account_id AND a.balance >= t.cost
          AND a.balance - t.cost - a.awaiting_reclaim >= -ledger_max_balance()
          AND (SELECT coalesce(sum(b.remaining), 0) FROM credit_blocks b
               WHERE b.account_id = a.id AND {{ template "block_spendable" "b" }}) >= t.cost
        RETURNING a.id AS account_id, a.balance
    ), charged AS (
        UPDATE jobs SET state = 'running', is_charged = true, charged_at = now(), updated_at = now()
        FROM debit
        WHERE jobs.id = p_job_id AND jobs.state = 'submitting' AND NOT jobs.is_charged
        RETURNING jobs AS job
    ), entry AS (
        INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
        SELECT d.account_id, (c.job).id, 'charge', -(c.job).cost, d.balance FROM charged c, debit d
        RETURNING id, account_id, balance_after, -amount AS amount
    ), to_draw AS (
        SELECT account_id, id AS entry_id, amount FROM entry
    ), {{ template "block_draw_plan" "false" }}, {{ template "block_draw_write" false }}
    SELECT 'applied', e.id, e.balance_after, c.job, (SELECT coalesce(sum(take), 0) FROM draw)
    INTO r.outcome, r.entry_id, r.balance_after, r.job, drawn
    FROM charged c, entry e;
    IF FOUND THEN
        -- The spendable blocks admitted the charge under the account's lock: a shortfall is a
        -- bug, and rolls the charge back.
        IF drawn <> (r.job).cost THEN
            RAISE EXCEPTION 'job %: its spendable blocks did not cover the charge they admitted', p_job_id
                USING ERRCODE = 'JB003';
        END IF;
        RETURN r;
    END IF;

    -- The account cannot pay: reject the job, nothing charged. Credits held by blocks not yet in
    -- effect, or past their expiry, count in the balance but cannot pay: insufficient credits too.
    SELECT CASE WHEN a.balance >= job.cost AND ledger_block_spendable(a.id) >= job.cost THEN 'exposure_limit'
                ELSE 'insufficient_credits' END
    INTO reason FROM jobs job JOIN accounts a ON a.id = job.account_id WHERE job.id = p_job_id;
    UPDATE jobs SET state = 'rejected', reject_reason = reason, updated_at = now(), rejected_at = now(), outcome_xid = pg_current_xact_id()
    WHERE id = p_job_id AND state = 'submitting'
    RETURNING * INTO j;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job %: charge guard lost under its own lock', p_job_id USING ERRCODE = 'JB003';
    END IF;
    RETURN ledger_job_result_of('rejected', NULL, NULL, j);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_charge(text, bytea)") }}
