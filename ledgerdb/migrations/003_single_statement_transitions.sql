-- The applied path of charge, refund and reclaim as ONE statement each, guard first.
--
-- Measured under pgbench, the functions of 001 ran the lifecycle (charge, refund, duplicate refund,
-- reclaim) at well under the speed of the same transitions as single statements: each function
-- ran three or four statements (guard, balance, row, result), each planned and executed on its
-- own. Here the guard is the first CTE and the balance change and the ledger row hang off its
-- match, so a transition that applies costs what the leanest raw SQL costs; only a call that
-- matches nothing goes on to find out why (ledger_job_unmatched), as before.
--
-- Writable-CTE rule: every CTE runs to completion whatever the later ones find, so the guard is
-- always the FIRST CTE; a guard in a later one would not undo an earlier write.

CREATE OR REPLACE FUNCTION ledger_charge(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    r           ledger_job_result;
    j           jobs;
    new_balance bigint;
    entry_id    bigint;
BEGIN
    -- Fast path: the job is submitting and the account can pay. The job row is locked first, as
    -- in every transition, so none of them can wait on another in a cycle.
    WITH target AS (
        SELECT id, account_id, cost FROM jobs
        WHERE id = p_job_id AND state = 'submitting' AND NOT is_charged
        FOR UPDATE
    ), debit AS (
        UPDATE accounts a SET balance = a.balance - t.cost, updated_at = now()
        FROM target t
        WHERE a.id = t.account_id AND a.balance >= t.cost
        RETURNING a.balance
    ), charged AS (
        UPDATE jobs SET state = 'running', is_charged = true, charged_at = now(), updated_at = now()
        FROM target t, debit
        WHERE jobs.id = t.id
        RETURNING jobs.*
    ), entry AS (
        INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
        SELECT c.account_id, c.id, 'charge', -c.cost, d.balance FROM charged c, debit d
        RETURNING id, balance_after
    )
    SELECT 'applied', e.id, e.balance_after, c.id, c.account_id, c.cost, c.state, c.state_before_delete, c.is_charged, c.is_refunded, c.is_reclaimed, c.attempts, c.reject_reason, c.refund_reason, c.created_at, c.updated_at, c.charged_at, c.delivered_at, c.refunded_at, c.reclaimed_at, c.deleted_at
    INTO r FROM charged c, entry e;
    IF FOUND THEN
        RETURN r;
    END IF;

    -- Slow path: say why nothing was charged, and reject a job its account cannot pay for. The
    -- debit is tried again under the job's lock, so a grant that landed meanwhile still counts.
    SELECT * INTO j FROM jobs WHERE id = p_job_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN ledger_job_result_of('not_found', NULL, NULL, NULL::jobs);
    ELSIF j.state = 'deleted' THEN
        RETURN ledger_job_result_of('gone', NULL, NULL, j);
    ELSIF j.state = 'rejected' THEN
        RETURN ledger_job_result_of('rejected', NULL, NULL, j);
    ELSIF j.is_charged THEN
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    END IF;

    UPDATE accounts a SET balance = a.balance - j.cost, updated_at = now()
    WHERE a.id = j.account_id AND a.balance >= j.cost
    RETURNING a.balance INTO new_balance;
    IF NOT FOUND THEN
        UPDATE jobs SET state = 'rejected', reject_reason = 'insufficient_credits', updated_at = now()
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
    RETURN ledger_job_result_of('applied', entry_id, new_balance, j);
END
$$;

CREATE OR REPLACE FUNCTION ledger_refund(p_job_id text, p_reason text, p_attempts integer)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    r ledger_job_result;
BEGIN
    WITH refunded AS (
        UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), updated_at = now(),
                        refund_reason = p_reason, attempts = greatest(attempts, p_attempts)
        WHERE id = p_job_id AND state = 'running' AND is_charged AND NOT is_refunded
        RETURNING *
    ), credit AS (
        -- The amount is the job's recorded cost, never a caller's number (money rule 5).
        UPDATE accounts a SET balance = a.balance + j.cost, updated_at = now()
        FROM refunded j
        WHERE a.id = j.account_id
        RETURNING a.balance
    ), entry AS (
        INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
        SELECT j.account_id, j.id, 'refund', j.cost, c.balance FROM refunded j, credit c
        RETURNING id, balance_after
    )
    SELECT 'applied', e.id, e.balance_after, j.id, j.account_id, j.cost, j.state, j.state_before_delete, j.is_charged, j.is_refunded, j.is_reclaimed, j.attempts, j.reject_reason, j.refund_reason, j.created_at, j.updated_at, j.charged_at, j.delivered_at, j.refunded_at, j.reclaimed_at, j.deleted_at
    INTO r FROM refunded j, entry e;
    IF FOUND THEN
        RETURN r;
    END IF;
    RETURN ledger_job_unmatched(p_job_id, ARRAY['refunded', 'recovered']);
END
$$;

CREATE OR REPLACE FUNCTION ledger_reclaim(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    r ledger_job_result;
BEGIN
    WITH recovered AS (
        UPDATE jobs SET state = 'recovered', is_reclaimed = true, reclaimed_at = now(), updated_at = now()
        WHERE id = p_job_id AND state = 'refunded' AND is_refunded AND NOT is_reclaimed
        RETURNING *
    ), debit AS (
        -- No balance check: the work was delivered, so the debt stands (the README's debt rule).
        UPDATE accounts a SET balance = a.balance - j.cost, updated_at = now()
        FROM recovered j
        WHERE a.id = j.account_id
        RETURNING a.balance
    ), entry AS (
        INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
        SELECT j.account_id, j.id, 'reclaim', -j.cost, d.balance FROM recovered j, debit d
        RETURNING id, balance_after
    )
    SELECT 'applied', e.id, e.balance_after, j.id, j.account_id, j.cost, j.state, j.state_before_delete, j.is_charged, j.is_refunded, j.is_reclaimed, j.attempts, j.reject_reason, j.refund_reason, j.created_at, j.updated_at, j.charged_at, j.delivered_at, j.refunded_at, j.reclaimed_at, j.deleted_at
    INTO r FROM recovered j, entry e;
    IF FOUND THEN
        RETURN r;
    END IF;
    RETURN ledger_job_unmatched(p_job_id, ARRAY['recovered']);
END
$$;

---- create above / drop below ----

-- Back to the multi-statement bodies of 001.
CREATE OR REPLACE FUNCTION ledger_charge(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    j        jobs;
    new_balance bigint;
    entry_id bigint;
BEGIN
    -- Unlike the other transitions, charge has two possible ends (running or rejected) that depend
    -- on the balance, so it takes the job row's lock first and decides under it. Every transition
    -- locks the job row before the account row, so none of them can wait on another in a cycle.
    SELECT * INTO j FROM jobs WHERE id = p_job_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN ledger_job_result_of('not_found', NULL, NULL, NULL::jobs);
    ELSIF j.state = 'deleted' THEN
        RETURN ledger_job_result_of('gone', NULL, NULL, j);
    ELSIF j.state = 'rejected' THEN
        RETURN ledger_job_result_of('rejected', NULL, NULL, j);
    ELSIF j.is_charged THEN
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    END IF;

    UPDATE accounts a SET balance = a.balance - j.cost, updated_at = now()
    WHERE a.id = j.account_id AND a.balance >= j.cost
    RETURNING a.balance INTO new_balance;
    IF NOT FOUND THEN
        UPDATE jobs SET state = 'rejected', reject_reason = 'insufficient_credits', updated_at = now()
        WHERE id = p_job_id AND state = 'submitting'
        RETURNING * INTO j;
        RETURN ledger_job_result_of('rejected', NULL, NULL, j);
    END IF;

    -- The guard of DESIGN.md (NOT is_charged): with the row locked above it always matches, but it
    -- stays in the WHERE so that this statement is correct on its own.
    UPDATE jobs SET state = 'running', is_charged = true, charged_at = now(), updated_at = now()
    WHERE id = p_job_id AND state = 'submitting' AND NOT is_charged
    RETURNING * INTO j;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job %: charge guard lost under its own lock', p_job_id USING ERRCODE = 'JB003';
    END IF;

    INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
    VALUES (j.account_id, j.id, 'charge', -j.cost, new_balance)
    RETURNING id INTO entry_id;
    RETURN ledger_job_result_of('applied', entry_id, new_balance, j);
END
$$;

CREATE OR REPLACE FUNCTION ledger_refund(p_job_id text, p_reason text, p_attempts integer)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    j        jobs;
    new_balance bigint;
    entry_id bigint;
BEGIN
    UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), updated_at = now(),
                    refund_reason = p_reason, attempts = greatest(attempts, p_attempts)
    WHERE id = p_job_id AND state = 'running' AND is_charged AND NOT is_refunded
    RETURNING * INTO j;
    IF NOT FOUND THEN
        RETURN ledger_job_unmatched(p_job_id, ARRAY['refunded', 'recovered']);
    END IF;

    -- The amount is the job's recorded cost, never a caller's number (money rule 5).
    UPDATE accounts a SET balance = a.balance + j.cost, updated_at = now()
    WHERE a.id = j.account_id
    RETURNING a.balance INTO new_balance;

    INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
    VALUES (j.account_id, j.id, 'refund', j.cost, new_balance)
    RETURNING id INTO entry_id;
    RETURN ledger_job_result_of('applied', entry_id, new_balance, j);
END
$$;

CREATE OR REPLACE FUNCTION ledger_reclaim(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    j        jobs;
    new_balance bigint;
    entry_id bigint;
BEGIN
    UPDATE jobs SET state = 'recovered', is_reclaimed = true, reclaimed_at = now(), updated_at = now()
    WHERE id = p_job_id AND state = 'refunded' AND is_refunded AND NOT is_reclaimed
    RETURNING * INTO j;
    IF NOT FOUND THEN
        RETURN ledger_job_unmatched(p_job_id, ARRAY['recovered']);
    END IF;

    -- No balance check: the work was delivered, so the debt stands even when the account has
    -- already spent the refund. A negative balance blocks every new charge until a grant covers it.
    UPDATE accounts a SET balance = a.balance - j.cost, updated_at = now()
    WHERE a.id = j.account_id
    RETURNING a.balance INTO new_balance;

    INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
    VALUES (j.account_id, j.id, 'reclaim', -j.cost, new_balance)
    RETURNING id INTO entry_id;
    RETURN ledger_job_result_of('applied', entry_id, new_balance, j);
END
$$;
