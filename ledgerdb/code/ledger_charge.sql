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
    r           ledger_job_result;
    j           jobs;
    new_balance bigint;
    entry_id    bigint;
    reason      text;
BEGIN
    -- Fast path, one statement: the guard is the FIRST CTE (every CTE runs to completion whatever
    -- the later ones find, so a guard in a later one would not undo an earlier write). The job row
    -- is locked before the account row, as in every transition, so none can wait on another in a
    -- cycle. The debit keeps the account's lower exposure in range (ledger_max_balance).
    WITH target AS (
        SELECT id, account_id, cost FROM jobs
        WHERE id = p_job_id AND state = 'submitting' AND NOT is_charged
          AND (p_fingerprint IS NULL OR request_fingerprint = p_fingerprint)
        FOR UPDATE
    ), debit AS (
        UPDATE accounts a SET balance = a.balance - t.cost, updated_at = now()
        FROM target t
        WHERE a.id = t.account_id AND a.balance >= t.cost
          AND a.balance - t.cost - a.awaiting_reclaim >= -ledger_max_balance()
          AND ledger_block_spendable(a.id) >= t.cost
        RETURNING a.balance
    ), charged AS (
        UPDATE jobs SET state = 'running', is_charged = true, charged_at = now(), updated_at = now()
        FROM target t, debit
        WHERE jobs.id = t.id
        RETURNING jobs AS job
    ), entry AS (
        INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
        SELECT (c.job).account_id, (c.job).id, 'charge', -(c.job).cost, d.balance FROM charged c, debit d
        RETURNING id, balance_after
    )
    SELECT 'applied', e.id, e.balance_after, c.job INTO r FROM charged c, entry e;
    IF FOUND THEN
        PERFORM ledger_charge_draw(r);
        RETURN r;
    END IF;

    -- Slow path: say why nothing was charged, and reject a job its account cannot pay for. The
    -- debit is tried again under the job's lock, so a grant that landed meanwhile still counts.
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

    UPDATE accounts a SET balance = a.balance - j.cost, updated_at = now()
    WHERE a.id = j.account_id AND a.balance >= j.cost
      AND a.balance - j.cost - a.awaiting_reclaim >= -ledger_max_balance()
      AND ledger_block_spendable(a.id) >= j.cost
    RETURNING a.balance INTO new_balance;
    IF NOT FOUND THEN
        -- Credits held by blocks not yet in effect, or past their expiry, count in the balance
        -- but cannot pay: insufficient credits too.
        SELECT CASE WHEN a.balance >= j.cost AND ledger_block_spendable(a.id) >= j.cost THEN 'exposure_limit'
                    ELSE 'insufficient_credits' END
        INTO reason FROM accounts a WHERE a.id = j.account_id;
        UPDATE jobs SET state = 'rejected', reject_reason = reason, updated_at = now(), rejected_at = now(), outcome_xid = pg_current_xact_id()
        WHERE id = p_job_id AND state = 'submitting'
        RETURNING * INTO j;
        RETURN ledger_job_result_of('rejected', NULL, NULL, j);
    END IF;
    UPDATE jobs SET state = 'running', is_charged = true, charged_at = now(), updated_at = now()
    WHERE id = p_job_id AND state = 'submitting' AND NOT is_charged
    RETURNING * INTO j;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job %: charge guard lost under its own lock', p_job_id USING ERRCODE = 'JB003';
    END IF;
    INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
    VALUES (j.account_id, j.id, 'charge', -j.cost, new_balance)
    RETURNING id INTO entry_id;
    r := ledger_job_result_of('applied', entry_id, new_balance, j);
    PERFORM ledger_charge_draw(r);
    RETURN r;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_charge(text, bytea)") }}

-- Draws a charge's credits from the account's blocks, in the order of spending. The charge was
-- admitted only if the spendable blocks cover it, under the account's lock: a shortfall here is a
-- bug, and rolls the charge back.
CREATE FUNCTION ledger_charge_draw(r ledger_job_result)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF ledger_block_draw((r.job).account_id, r.entry_id, (r.job).cost, false) <> 0 THEN
        RAISE EXCEPTION 'job %: its spendable blocks did not cover the charge they admitted', (r.job).id
            USING ERRCODE = 'JB003';
    END IF;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_charge_draw(ledger_job_result)") }}
