-- The credit ledger: accounts, jobs (keyed by the client's job ID) and append-only ledger entries.
--
-- Every money movement is a function below, so that one call is one round trip and one
-- transaction: the guard (a conditional UPDATE on the job row), the account's balance change and
-- the ledger row commit together or not at all (DESIGN.md, money rule 4).

CREATE TABLE accounts (
    id         text        PRIMARY KEY,
    balance    bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT accounts_id_format CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$')
);

CREATE TABLE jobs (
    id                  text        PRIMARY KEY,
    account_id          text        NOT NULL REFERENCES accounts (id),
    cost                bigint      NOT NULL,
    state               text        NOT NULL DEFAULT 'submitting',
    -- The three guard flags of seed 000. They only ever move from false to true.
    is_charged          boolean     NOT NULL DEFAULT false,
    is_refunded         boolean     NOT NULL DEFAULT false,
    is_reclaimed        boolean     NOT NULL DEFAULT false,
    -- Set once, when the job becomes a tombstone: what the user's money was before deletion.
    state_before_delete text,
    attempts            integer     NOT NULL DEFAULT 0,
    -- SHA-256 of the submitted request: the same ID with another request is a conflict.
    request_fingerprint bytea       NOT NULL,
    reject_reason       text,
    refund_reason       text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    charged_at          timestamptz,
    delivered_at        timestamptz,
    refunded_at         timestamptz,
    reclaimed_at        timestamptz,
    deleted_at          timestamptz,
    CONSTRAINT jobs_id_format CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    CONSTRAINT jobs_cost_positive CHECK (cost > 0),
    CONSTRAINT jobs_attempts_non_negative CHECK (attempts >= 0),
    CONSTRAINT jobs_state_known CHECK (state IN
        ('submitting', 'rejected', 'running', 'delivered', 'refunded', 'recovered', 'deleted')),
    CONSTRAINT jobs_state_before_delete CHECK (
        (state = 'deleted') = (state_before_delete IS NOT NULL)
        AND (state_before_delete IS NULL
             OR state_before_delete IN ('rejected', 'delivered', 'refunded', 'recovered'))),
    -- The flags must agree with each other and with the state, so that a row can never say
    -- "refunded" without having been charged, whatever code writes it.
    CONSTRAINT jobs_flags_ordered CHECK (
        (NOT is_refunded OR is_charged) AND (NOT is_reclaimed OR is_refunded)),
    CONSTRAINT jobs_flags_match_state CHECK (
        CASE coalesce(state_before_delete, state)
            WHEN 'submitting' THEN NOT is_charged
            WHEN 'rejected'   THEN NOT is_charged
            WHEN 'running'    THEN is_charged AND NOT is_refunded
            WHEN 'delivered'  THEN is_charged AND NOT is_refunded
            WHEN 'refunded'   THEN is_refunded AND NOT is_reclaimed
            WHEN 'recovered'  THEN is_reclaimed
        END)
);

CREATE INDEX jobs_account_id_created_at ON jobs (account_id, created_at);

CREATE TABLE ledger_entries (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id      text        NOT NULL REFERENCES accounts (id),
    job_id          text        REFERENCES jobs (id),
    kind            text        NOT NULL,
    amount          bigint      NOT NULL,
    -- The account's balance right after this row: Audit replays the chain row by row.
    balance_after   bigint      NOT NULL,
    -- The caller's key for grants and adjustments (idempotent top-ups).
    idempotency_key text,
    memo            text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_entries_kind_known CHECK (kind IN ('grant', 'charge', 'refund', 'reclaim', 'adjustment')),
    CONSTRAINT ledger_entries_amount_sign CHECK (CASE kind
        WHEN 'grant'      THEN amount > 0
        WHEN 'charge'     THEN amount < 0
        WHEN 'refund'     THEN amount > 0
        WHEN 'reclaim'    THEN amount < 0
        WHEN 'adjustment' THEN amount <> 0
    END),
    CONSTRAINT ledger_entries_job_kinds CHECK ((kind IN ('charge', 'refund', 'reclaim')) = (job_id IS NOT NULL)),
    CONSTRAINT ledger_entries_keyed_kinds CHECK ((kind IN ('grant', 'adjustment')) = (idempotency_key IS NOT NULL)),
    -- Money rule 2, the second time: at most one charge, one refund and one reclaim per job.
    -- (Grants and adjustments have no job; NULLs are distinct, so they never collide here.)
    CONSTRAINT ledger_entries_one_per_job_kind UNIQUE (job_id, kind),
    CONSTRAINT ledger_entries_one_per_key UNIQUE (account_id, idempotency_key)
);

CREATE INDEX ledger_entries_account_id_id ON ledger_entries (account_id, id);

-- Money rule 1: the database itself refuses to change or remove a ledger row, whoever asks.
CREATE FUNCTION ledger_refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on % refused: % is append-only', TG_OP, TG_TABLE_NAME, TG_TABLE_NAME
        USING ERRCODE = 'JB001';
END
$$;

CREATE TRIGGER ledger_entries_append_only
    BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();

CREATE TRIGGER ledger_entries_no_truncate
    BEFORE TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_rewrite();

-- Money rule 7: a job ID, once accepted, is remembered forever; deletion is a tombstone state.
CREATE TRIGGER jobs_never_deleted
    BEFORE DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();

CREATE TRIGGER jobs_no_truncate
    BEFORE TRUNCATE ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_rewrite();

CREATE TRIGGER accounts_never_deleted
    BEFORE DELETE ON accounts
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();

CREATE TRIGGER accounts_no_truncate
    BEFORE TRUNCATE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_rewrite();

-- Money rule 5: what a job costs, whose it is and what was asked are fixed at submission, and a
-- guard flag never goes back to false.
CREATE FUNCTION jobs_refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id <> OLD.id OR NEW.account_id <> OLD.account_id OR NEW.cost <> OLD.cost
        OR NEW.request_fingerprint <> OLD.request_fingerprint THEN
        RAISE EXCEPTION 'job %: id, account, cost and request are fixed at submission', OLD.id
            USING ERRCODE = 'JB002';
    END IF;
    IF (OLD.is_charged AND NOT NEW.is_charged) OR (OLD.is_refunded AND NOT NEW.is_refunded)
        OR (OLD.is_reclaimed AND NOT NEW.is_reclaimed) OR (OLD.state = 'deleted' AND NEW.state <> 'deleted') THEN
        RAISE EXCEPTION 'job %: guard flags and tombstones never go back', OLD.id
            USING ERRCODE = 'JB002';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER jobs_fixed_fields
    BEFORE UPDATE ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_refuse_rewrite();

-- What every job operation answers: what happened, the ledger row it wrote (if any), the
-- account's balance after it (if it moved), and the job as it now stands.
--
-- outcome is one of:
--   applied          this call made the change
--   already_applied  an earlier call made it; nothing was written
--   not_applied      the job is in a state the change does not apply to; nothing was written
--   not_found        no job has this ID
--   gone             the job is deleted (a tombstone)
--   conflict         submit: the ID exists with a different request
--   rejected         charge: refused for insufficient credits (now or earlier); nothing charged
--   unknown_account  submit: the account does not exist
CREATE TYPE ledger_job_result AS (
    outcome             text,
    entry_id            bigint,
    balance_after       bigint,
    id                  text,
    account_id          text,
    cost                bigint,
    state               text,
    state_before_delete text,
    is_charged          boolean,
    is_refunded         boolean,
    is_reclaimed        boolean,
    attempts            integer,
    reject_reason       text,
    refund_reason       text,
    created_at          timestamptz,
    updated_at          timestamptz,
    charged_at          timestamptz,
    delivered_at        timestamptz,
    refunded_at         timestamptz,
    reclaimed_at        timestamptz,
    deleted_at          timestamptz
);

CREATE FUNCTION ledger_job_result_of(p_outcome text, p_entry_id bigint, p_balance_after bigint, j jobs)
RETURNS ledger_job_result
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_outcome, p_entry_id, p_balance_after, j.id, j.account_id, j.cost, j.state,
           j.state_before_delete, j.is_charged, j.is_refunded, j.is_reclaimed, j.attempts,
           j.reject_reason, j.refund_reason, j.created_at, j.updated_at, j.charged_at,
           j.delivered_at, j.refunded_at, j.reclaimed_at, j.deleted_at
$$;

-- Writes the placeholder for a client job ID (state submitting, nothing charged). The same ID with
-- the same request answers the original job; with another request, a conflict; once deleted, gone.
CREATE FUNCTION ledger_submit(p_job_id text, p_account_id text, p_cost bigint, p_fingerprint bytea)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    -- The account is checked first so that an unknown one is reported as such, not as an
    -- opaque foreign-key failure.
    PERFORM 1 FROM accounts WHERE id = p_account_id;
    IF NOT FOUND THEN
        SELECT * INTO j FROM jobs WHERE id = p_job_id;
        IF NOT FOUND THEN
            RETURN ledger_job_result_of('unknown_account', NULL, NULL, NULL::jobs);
        END IF;
    ELSE
        -- ON CONFLICT waits for a concurrent insert of the same ID to commit or roll back, so
        -- exactly one submission of an ID writes the placeholder.
        INSERT INTO jobs (id, account_id, cost, request_fingerprint)
        VALUES (p_job_id, p_account_id, p_cost, p_fingerprint)
        ON CONFLICT (id) DO NOTHING
        RETURNING * INTO j;
        IF FOUND THEN
            RETURN ledger_job_result_of('applied', NULL, NULL, j);
        END IF;
        SELECT * INTO j FROM jobs WHERE id = p_job_id;
    END IF;

    IF j.state = 'deleted' THEN
        RETURN ledger_job_result_of('gone', NULL, NULL, j);
    ELSIF j.request_fingerprint <> p_fingerprint THEN
        RETURN ledger_job_result_of('conflict', NULL, NULL, j);
    END IF;
    RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
END
$$;

-- Charges a submitted job its recorded cost: submitting -> running, or -> rejected when the
-- account cannot pay (nothing charged).
CREATE FUNCTION ledger_charge(p_job_id text)
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

-- Says why a guarded job transition matched no row: the job is missing, deleted, already past the
-- transition (already_applied) or not in a state it applies to (not_applied).
CREATE FUNCTION ledger_job_unmatched(p_job_id text, p_done_states text[])
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job_id;
    IF NOT FOUND THEN
        RETURN ledger_job_result_of('not_found', NULL, NULL, NULL::jobs);
    ELSIF j.state = ANY (p_done_states) THEN
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    ELSIF j.state = 'deleted' THEN
        RETURN ledger_job_result_of('gone', NULL, NULL, j);
    END IF;
    RETURN ledger_job_result_of('not_applied', NULL, NULL, j);
END
$$;

-- Gives back a running job's charge when its work failed for good or timed out: running -> refunded.
CREATE FUNCTION ledger_refund(p_job_id text, p_reason text, p_attempts integer)
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

-- Takes the refund back when a refunded job's result landed after all: refunded -> recovered.
-- The success path calls it unconditionally; on a job that was never refunded it matches nothing.
CREATE FUNCTION ledger_reclaim(p_job_id text)
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

-- Records that a running job's work succeeded: running -> delivered. No money moves.
CREATE FUNCTION ledger_deliver(p_job_id text, p_attempts integer)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    UPDATE jobs SET state = 'delivered', delivered_at = now(), updated_at = now(),
                    attempts = greatest(attempts, p_attempts)
    WHERE id = p_job_id AND state = 'running'
    RETURNING * INTO j;
    IF NOT FOUND THEN
        RETURN ledger_job_unmatched(p_job_id, ARRAY['delivered', 'recovered']);
    END IF;
    RETURN ledger_job_result_of('applied', NULL, NULL, j);
END
$$;

-- Records how many attempts the work has had; the count only grows.
CREATE FUNCTION ledger_record_attempt(p_job_id text, p_attempts integer)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    UPDATE jobs SET attempts = p_attempts, updated_at = now()
    WHERE id = p_job_id AND state IN ('running', 'refunded') AND attempts < p_attempts
    RETURNING * INTO j;
    IF FOUND THEN
        RETURN ledger_job_result_of('applied', NULL, NULL, j);
    END IF;
    SELECT * INTO j FROM jobs WHERE id = p_job_id;
    IF NOT FOUND THEN
        RETURN ledger_job_result_of('not_found', NULL, NULL, NULL::jobs);
    ELSIF j.state = 'deleted' THEN
        RETURN ledger_job_result_of('gone', NULL, NULL, j);
    ELSIF j.state IN ('running', 'refunded') THEN
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    END IF;
    RETURN ledger_job_result_of('not_applied', NULL, NULL, j);
END
$$;

-- Turns a settled job into a tombstone: its ID can never be submitted or charged again. Refused
-- while the job is submitting or running: those rows are the evidence for reconciliation.
CREATE FUNCTION ledger_delete(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    UPDATE jobs SET state = 'deleted', state_before_delete = state, deleted_at = now(), updated_at = now()
    WHERE id = p_job_id AND state IN ('rejected', 'delivered', 'refunded', 'recovered')
    RETURNING * INTO j;
    IF FOUND THEN
        RETURN ledger_job_result_of('applied', NULL, NULL, j);
    END IF;
    RETURN ledger_job_unmatched(p_job_id, ARRAY['deleted']);
END
$$;

-- Opens an account with a zero balance; opening it again changes nothing.
CREATE FUNCTION ledger_open_account(p_account_id text)
RETURNS TABLE (outcome text, balance bigint)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO accounts (id) VALUES (p_account_id) ON CONFLICT (id) DO NOTHING;
    IF FOUND THEN
        RETURN QUERY SELECT 'applied'::text, 0::bigint;
    ELSE
        RETURN QUERY SELECT 'already_applied'::text, a.balance FROM accounts a WHERE a.id = p_account_id;
    END IF;
END
$$;

-- Posts a grant (a top-up) or an adjustment (an operator's correction) to an account, once per
-- caller's key. The same key with the same kind and amount answers the original row; with another
-- kind or amount, a conflict.
CREATE FUNCTION ledger_post(p_account_id text, p_kind text, p_amount bigint, p_key text, p_memo text)
RETURNS TABLE (outcome text, entry_id bigint, balance_after bigint)
LANGUAGE plpgsql AS $$
DECLARE
    e       ledger_entries;
    new_balance bigint;
BEGIN
    -- Lock the account first: every post of a key to this account then runs one after the other,
    -- so the look-up below cannot miss a row that a concurrent post is about to write.
    PERFORM 1 FROM accounts WHERE id = p_account_id FOR UPDATE;
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

    UPDATE accounts a SET balance = a.balance + p_amount, updated_at = now()
    WHERE a.id = p_account_id
    RETURNING a.balance INTO new_balance;

    INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, memo)
    VALUES (p_account_id, p_kind, p_amount, new_balance, p_key, p_memo)
    RETURNING * INTO e;
    RETURN QUERY SELECT 'applied'::text, e.id, e.balance_after;
END
$$;

---- create above / drop below ----

DROP FUNCTION ledger_post(text, text, bigint, text, text);
DROP FUNCTION ledger_open_account(text);
DROP FUNCTION ledger_delete(text);
DROP FUNCTION ledger_record_attempt(text, integer);
DROP FUNCTION ledger_deliver(text, integer);
DROP FUNCTION ledger_reclaim(text);
DROP FUNCTION ledger_refund(text, text, integer);
DROP FUNCTION ledger_job_unmatched(text, text[]);
DROP FUNCTION ledger_charge(text);
DROP FUNCTION ledger_submit(text, text, bigint, bytea);
DROP FUNCTION ledger_job_result_of(text, bigint, bigint, jobs);
DROP TYPE ledger_job_result;
-- The tables refuse TRUNCATE and row deletes by design; dropping them is the only way back.
DROP TABLE ledger_entries;
DROP TABLE jobs;
DROP TABLE accounts;
DROP FUNCTION jobs_refuse_rewrite();
DROP FUNCTION ledger_refuse_rewrite();
