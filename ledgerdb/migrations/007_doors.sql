-- Every door keeps the money right (docs: "Doors and healing").
--
-- 1. Bounded balances. A refund adds a running job's cost back and a reclaim takes a refunded
--    job's cost again, and neither may ever be refused (the first is the compensation of a charge,
--    the second the debt rule). So every account keeps
--        upper exposure = balance + sum of its running jobs' costs    <= ledger_max_balance()
--        lower exposure = balance - sum of its refunded jobs' costs   >= -ledger_max_balance()
--    which is exactly "every pending refund and reclaim still fits". Job transitions leave the
--    upper exposure unchanged or lower it; only grants and positive adjustments raise it, so they
--    are checked (ledger_post). Only charges and negative adjustments lower the lower exposure,
--    so they are checked (ledger_charge, ledger_post). awaiting_reclaim keeps the second sum on the
--    account row, which refunds and reclaims already lock, so the charge's check costs no read.
-- 2. Settle: a result is billed in one step and one transaction whatever the job's state —
--    running -> delivered, or refunded -> recovered (the refund reclaimed) — so a result that
--    races a refund can never be lost between a reclaim and a delivery.
-- 3. The charge can check that the job it charges is the request its workflow runs (a workflow
--    started directly under a job's ID with another request is refused, nothing charged).
-- 4. Results are durable before they are acknowledged: result_reports is the inbox a result is
--    written to before it is signalled, applied later by the reconcile pass when Temporal was
--    unreachable.
-- 5. Alarms: a ledger step that the database refuses for good (a violated constraint, an
--    out-of-range amount) is recorded here instead of being retried forever.
-- 6. Reject reasons are codes: insufficient_credits, workflow_ended_before_charging,
--    workflow_id_taken, exposure_limit.
--
-- Per 005's rule: every function the service calls is SECURITY DEFINER with search_path pinned
-- and EXECUTE granted to jobbill_app only (the DO block at the end).

CREATE FUNCTION ledger_max_balance() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 1000000000000000000::bigint $$;

ALTER TABLE accounts ADD COLUMN awaiting_reclaim bigint NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD CONSTRAINT accounts_awaiting_reclaim_non_negative CHECK (awaiting_reclaim >= 0);
UPDATE accounts a SET awaiting_reclaim = coalesce(
    (SELECT sum(j.cost) FROM jobs j WHERE j.account_id = a.id AND j.state = 'refunded'), 0);

-- The grant's check sums an account's running jobs; the reconcile pass lists them.
CREATE INDEX jobs_running ON jobs (account_id) WHERE state = 'running';

UPDATE jobs SET reject_reason = 'workflow_ended_before_charging'
WHERE reject_reason = 'workflow ended before charging';

CREATE TABLE result_reports (
    job_id       text        NOT NULL REFERENCES jobs (id),
    attempt      integer     NOT NULL,
    output_ref   text        NOT NULL,
    finished_at  timestamptz,
    received_at  timestamptz NOT NULL DEFAULT now(),
    -- Set once the job's workflow (or the late-result fallback) has taken the result.
    applied_at   timestamptz,
    applied_via  text,
    PRIMARY KEY (job_id, attempt),
    CONSTRAINT result_reports_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT result_reports_applied CHECK ((applied_at IS NULL) = (applied_via IS NULL)),
    CONSTRAINT result_reports_applied_via CHECK (applied_via IN ('signal', 'fallback', 'settled'))
);

CREATE INDEX result_reports_unapplied ON result_reports (received_at) WHERE applied_at IS NULL;

CREATE TABLE ledger_alarms (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id    text        NOT NULL REFERENCES jobs (id),
    step      text        NOT NULL,
    message   text        NOT NULL,
    raised_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_alarms_one_per_step UNIQUE (job_id, step)
);

DROP FUNCTION ledger_charge(text);

-- Charges a submitted job its recorded cost: submitting -> running, or -> rejected when the
-- account cannot pay (nothing charged). With a fingerprint, a job submitted with another request
-- answers conflict and nothing changes.
CREATE FUNCTION ledger_charge(p_job_id text, p_fingerprint bytea)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    r           ledger_job_result;
    j           jobs;
    new_balance bigint;
    entry_id    bigint;
    reason      text;
BEGIN
    -- Fast path, one statement (003): the guard is the first CTE, the job row is locked before the
    -- account row, as in every transition, so none of them can wait on another in a cycle.
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
    RETURNING a.balance INTO new_balance;
    IF NOT FOUND THEN
        SELECT CASE WHEN a.balance >= j.cost THEN 'exposure_limit' ELSE 'insufficient_credits' END
        INTO reason FROM accounts a WHERE a.id = j.account_id;
        UPDATE jobs SET state = 'rejected', reject_reason = reason, updated_at = now()
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

-- Gives back a running job's charge when its work failed for good, timed out or was stopped:
-- running -> refunded. The refunded cost now awaits a possible reclaim.
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
        UPDATE accounts a SET balance = a.balance + j.cost, awaiting_reclaim = a.awaiting_reclaim + j.cost,
                              updated_at = now()
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

-- Takes the refund back when a refunded job's result landed after all: refunded -> recovered.
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
        -- No balance check: the work was delivered, so the debt stands (the debt rule). The lower
        -- exposure bound guarantees the balance still fits.
        UPDATE accounts a SET balance = a.balance - j.cost, awaiting_reclaim = a.awaiting_reclaim - j.cost,
                              updated_at = now()
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

-- Bills a job's result in one transaction, whatever happened before it landed: a running job is
-- delivered (no money moves); a refunded one is recovered (its refund reclaimed, the debt rule
-- applies). A delivered or recovered job answers already_applied.
CREATE FUNCTION ledger_settle(p_job_id text, p_attempts integer)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    r ledger_job_result;
BEGIN
    UPDATE jobs SET state = 'delivered', delivered_at = now(), updated_at = now(),
                    attempts = greatest(attempts, p_attempts)
    WHERE id = p_job_id AND state = 'running'
    RETURNING * INTO j;
    IF FOUND THEN
        RETURN ledger_job_result_of('applied', NULL, NULL, j);
    END IF;
    r := ledger_reclaim(p_job_id);
    IF r.outcome = 'applied' THEN
        RETURN r;
    END IF;
    RETURN ledger_job_unmatched(p_job_id, ARRAY['delivered', 'recovered']);
END
$$;

-- Turns a settled job into a tombstone. A refunded job deleted can no longer be reclaimed (a late
-- result for it is discarded), so its cost stops awaiting a reclaim.
CREATE OR REPLACE FUNCTION ledger_delete(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
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

-- Posts a grant or an adjustment once per key, refusing one that would take the account's
-- exposures out of range (out_of_range, nothing written). The sums are numeric so that the check
-- itself cannot overflow.
CREATE OR REPLACE FUNCTION ledger_post(p_account_id text, p_kind text, p_amount bigint, p_key text, p_memo text)
RETURNS TABLE (outcome text, entry_id bigint, balance_after bigint)
LANGUAGE plpgsql AS $$
DECLARE
    e           ledger_entries;
    acct        accounts;
    running     numeric;
    new_balance bigint;
BEGIN
    -- Lock the account first: every post of a key to this account then runs one after the other,
    -- so the look-up below cannot miss a row that a concurrent post is about to write, and no
    -- transition of its jobs can move money while the exposures are checked.
    SELECT * INTO acct FROM accounts WHERE id = p_account_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unknown_account'::text, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;

    SELECT * INTO e FROM ledger_entries le WHERE le.account_id = p_account_id AND le.idempotency_key = p_key;
    IF FOUND THEN
        IF e.kind = p_kind AND e.amount = p_amount THEN
            RETURN QUERY SELECT 'already_applied'::text, e.id, e.balance_after;
        ELSE
            RETURN QUERY SELECT 'conflict'::text, e.id, e.balance_after;
        END IF;
        RETURN;
    END IF;

    IF p_amount > 0 THEN
        SELECT coalesce(sum(j.cost), 0) INTO running FROM jobs j
        WHERE j.account_id = p_account_id AND j.state = 'running';
        IF acct.balance::numeric + p_amount + running > ledger_max_balance() THEN
            RETURN QUERY SELECT 'out_of_range'::text, NULL::bigint, acct.balance;
            RETURN;
        END IF;
    ELSIF acct.balance::numeric + p_amount - acct.awaiting_reclaim < -ledger_max_balance() THEN
        RETURN QUERY SELECT 'out_of_range'::text, NULL::bigint, acct.balance;
        RETURN;
    END IF;

    UPDATE accounts a SET balance = a.balance + p_amount, updated_at = now()
    WHERE a.id = p_account_id
    RETURNING a.balance INTO new_balance;

    INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, memo)
    VALUES (p_account_id, p_kind, p_amount, new_balance, p_key, p_memo)
    RETURNING * INTO e;
    RETURN QUERY SELECT 'applied'::text, e.id, e.balance_after;
END
$$;

DROP FUNCTION ledger_reject_orphan(text);

-- Rejects a placeholder whose workflow can never charge it (submitting -> rejected, nothing
-- charged, no row): it closed before charging, or its workflow ID is held by a workflow that is not
-- this job's. The guard is the state itself, under the row's lock: a charge that raced this call
-- either committed first (not_applied) or finds the job rejected and charges nothing.
CREATE FUNCTION ledger_reject_orphan(p_job_id text, p_reason text)
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
    ELSIF j.state = 'rejected' THEN
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    ELSIF j.state <> 'submitting' OR j.is_charged THEN
        RETURN ledger_job_result_of('not_applied', NULL, NULL, j);
    END IF;
    UPDATE jobs SET state = 'rejected', reject_reason = p_reason, updated_at = now()
    WHERE id = p_job_id AND state = 'submitting' AND NOT is_charged
    RETURNING * INTO j;
    RETURN ledger_job_result_of('applied', NULL, NULL, j);
END
$$;

-- Writes a reported result to the inbox before anyone acknowledges it: once per job and attempt.
-- The same report again answers already_applied; another output for the same attempt, conflict.
-- A job that was never charged (submitting, rejected) has no work to deliver: not_started.
CREATE FUNCTION ledger_record_result(p_job_id text, p_attempt integer, p_output_ref text, p_finished_at timestamptz)
RETURNS TABLE (outcome text, job_state text, received_at timestamptz, applied_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    j  jobs;
    rr result_reports;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::text, NULL::timestamptz, NULL::timestamptz;
        RETURN;
    ELSIF j.state = 'deleted' THEN
        RETURN QUERY SELECT 'gone'::text, j.state, NULL::timestamptz, NULL::timestamptz;
        RETURN;
    ELSIF NOT j.is_charged THEN
        RETURN QUERY SELECT 'not_started'::text, j.state, NULL::timestamptz, NULL::timestamptz;
        RETURN;
    END IF;
    INSERT INTO result_reports (job_id, attempt, output_ref, finished_at)
    VALUES (p_job_id, p_attempt, p_output_ref, p_finished_at)
    ON CONFLICT (job_id, attempt) DO NOTHING
    RETURNING * INTO rr;
    IF FOUND THEN
        RETURN QUERY SELECT 'applied'::text, j.state, rr.received_at, rr.applied_at;
        RETURN;
    END IF;
    SELECT * INTO rr FROM result_reports r WHERE r.job_id = p_job_id AND r.attempt = p_attempt;
    IF rr.output_ref <> p_output_ref THEN
        RETURN QUERY SELECT 'conflict'::text, j.state, rr.received_at, rr.applied_at;
    ELSE
        RETURN QUERY SELECT 'already_applied'::text, j.state, rr.received_at, rr.applied_at;
    END IF;
END
$$;

-- Marks a recorded result as taken by the job's workflow or the fallback, once.
CREATE FUNCTION ledger_mark_result_applied(p_job_id text, p_attempt integer, p_via text)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE result_reports SET applied_at = now(), applied_via = p_via
    WHERE job_id = p_job_id AND attempt = p_attempt AND applied_at IS NULL;
    IF FOUND THEN
        RETURN 'applied';
    END IF;
    PERFORM 1 FROM result_reports WHERE job_id = p_job_id AND attempt = p_attempt;
    IF FOUND THEN
        RETURN 'already_applied';
    END IF;
    RETURN 'not_found';
END
$$;

-- Records that the database refused a job's ledger step for good, once per job and step.
CREATE FUNCTION ledger_raise_alarm(p_job_id text, p_step text, p_message text)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM jobs WHERE id = p_job_id;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    INSERT INTO ledger_alarms (job_id, step, message) VALUES (p_job_id, p_step, p_message)
    ON CONFLICT (job_id, step) DO NOTHING;
    IF FOUND THEN
        RETURN 'applied';
    END IF;
    RETURN 'already_applied';
END
$$;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'ledger_charge(text, bytea)',
        'ledger_refund(text, text, integer)',
        'ledger_reclaim(text)',
        'ledger_settle(text, integer)',
        'ledger_delete(text)',
        'ledger_post(text, text, bigint, text, text)',
        'ledger_reject_orphan(text, text)',
        'ledger_record_result(text, integer, text, timestamptz)',
        'ledger_mark_result_applied(text, integer, text)',
        'ledger_raise_alarm(text, text, text)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', fn, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO jobbill_app', fn);
    END LOOP;
    -- Called only inside the functions above, which run as the owner.
    REVOKE ALL ON FUNCTION ledger_max_balance() FROM PUBLIC;
END
$$;
