-- The credit ledger's tables, types and constraints: accounts, jobs (keyed by the client's job ID),
-- the requests they were submitted with, append-only ledger entries, the result inbox and alarms.
--
-- Every function (the guarded money operations, the triggers that refuse rewrites) lives in
-- ledgerdb/code, one file each, and is installed after every migration (see ledgerdb.Migrate):
-- a change to a money function is an ordinary diff of its file, not a new migration. Migrations
-- hold what has state — tables, types, constraints, indexes, grants on tables — and change it
-- only forward, with a new numbered file.
--
-- Least privilege: the service connects as the role jobbill_app, which may read the ledger and
-- call the money functions, and nothing else. Run as their owner (SECURITY DEFINER, search_path
-- pinned), the guarded functions are the only door through which money moves: with INSERT or
-- UPDATE grants, the service could write a ledger row outside any guard or set a balance to any
-- number. The role is created outside the migrations (scripts/ensure-postgres.sh; the compose
-- file's Postgres init script), because creating roles takes CREATEROLE, which the owner should
-- not have. Its name is fixed; an operator who logs the service in under another name creates
-- jobbill_app NOLOGIN and grants it to that login.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'jobbill_app') THEN
        RAISE EXCEPTION 'role jobbill_app does not exist'
            USING HINT = 'Run scripts/ensure-postgres.sh, or CREATE ROLE jobbill_app (LOGIN, or NOLOGIN '
                         'granted to the service''s login role), then migrate again.';
    END IF;
END
$$;

CREATE TABLE accounts (
    id               text        PRIMARY KEY,
    balance          bigint      NOT NULL DEFAULT 0,
    -- The sum of the costs of the account's refunded jobs, which a late result may still reclaim:
    -- the lower exposure bound (docs/design.md, "Bounded balances") rests on it, and the refund
    -- and reclaim that change it already lock this row.
    awaiting_reclaim bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT accounts_id_format CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    CONSTRAINT accounts_awaiting_reclaim_non_negative CHECK (awaiting_reclaim >= 0)
);

-- A job's row: who pays, what it costs, where it stands. Its column order is the order of
-- ledgerdb's jobRow, which reads it as one composite value.
CREATE TABLE jobs (
    id                  text        PRIMARY KEY,
    account_id          text        NOT NULL REFERENCES accounts (id),
    cost                bigint      NOT NULL,
    state               text        NOT NULL DEFAULT 'submitting',
    -- Set once, when the job becomes a tombstone: the state it had before deletion.
    state_before_delete text,
    -- The three guard flags. They only ever move from false to true.
    is_charged          boolean     NOT NULL DEFAULT false,
    is_refunded         boolean     NOT NULL DEFAULT false,
    is_reclaimed        boolean     NOT NULL DEFAULT false,
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
        END),
    CONSTRAINT jobs_reject_reason_known CHECK (reject_reason IN
        ('insufficient_credits', 'exposure_limit', 'workflow_ended_before_charging', 'workflow_id_taken'))
);

CREATE INDEX jobs_account_id_created_at ON jobs (account_id, created_at);
-- The grant's exposure check sums an account's running jobs; the reconcile pass lists them.
CREATE INDEX jobs_running ON jobs (account_id) WHERE state = 'running';

-- The request a job was submitted with, kept (like its cost) for as long as the job: a dead letter
-- re-driven after its workflow closed runs the work on it, and the ledger is the one record that
-- outlives Temporal's history retention. Apart from the job row, so that the answers of the money
-- functions never carry it.
CREATE TABLE job_requests (
    job_id  text  PRIMARY KEY REFERENCES jobs (id),
    request bytea NOT NULL
);

CREATE TABLE ledger_entries (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id      text        NOT NULL REFERENCES accounts (id),
    job_id          text        REFERENCES jobs (id),
    kind            text        NOT NULL,
    amount          bigint      NOT NULL,
    -- The account's balance right after this row: the audit replays the chain row by row.
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
    -- The reversing-pairs rule, the second time: at most one charge, one refund and one reclaim per
    -- job. (Grants and adjustments have no job; NULLs are distinct, so they never collide here.)
    CONSTRAINT ledger_entries_one_per_job_kind UNIQUE (job_id, kind),
    CONSTRAINT ledger_entries_one_per_key UNIQUE (account_id, idempotency_key)
);

CREATE INDEX ledger_entries_account_id_id ON ledger_entries (account_id, id);

-- The result inbox: a reported result is written here before anyone acknowledges it, once per job
-- and attempt, and marked applied once the job's workflow or the late-result fallback took it.
CREATE TABLE result_reports (
    job_id      text        NOT NULL REFERENCES jobs (id),
    attempt     integer     NOT NULL,
    output_ref  text        NOT NULL,
    finished_at timestamptz,
    received_at timestamptz NOT NULL DEFAULT now(),
    applied_at  timestamptz,
    applied_via text,
    PRIMARY KEY (job_id, attempt),
    CONSTRAINT result_reports_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT result_reports_applied CHECK ((applied_at IS NULL) = (applied_via IS NULL)),
    CONSTRAINT result_reports_applied_via CHECK (applied_via IN ('signal', 'fallback', 'settled'))
);

CREATE INDEX result_reports_unapplied ON result_reports (received_at) WHERE applied_at IS NULL;

-- Ledger steps the database refused for good, once per job and step: each needs an operator.
CREATE TABLE ledger_alarms (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id    text        NOT NULL REFERENCES jobs (id),
    step      text        NOT NULL,
    message   text        NOT NULL,
    raised_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_alarms_one_per_step UNIQUE (job_id, step)
);

-- Which version of ledgerdb/code is installed (the SHA-256 of its rendered SQL): a migrate whose
-- functions are already installed changes nothing, so that processes starting at once do not
-- reinstall them under each other's calls.
CREATE TABLE ledger_code_version (
    id           integer     PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    hash         text        NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT now()
);

-- What every job operation answers: what happened, the ledger row it wrote (if any), the
-- account's balance after it (if it moved), and the job as it now stands (NULL when there is no
-- such job). outcome is one of:
--   applied          this call made the change
--   already_applied  an earlier call made it; nothing was written
--   not_applied      the job is in a state the change does not apply to; nothing was written
--   not_found        no job has this ID
--   gone             the job is deleted (a tombstone)
--   conflict         the ID holds a different request
--   rejected         charge: the job is rejected (now or earlier); nothing charged
--   unknown_account  submit: the account does not exist
CREATE TYPE ledger_job_result AS (
    outcome       text,
    entry_id      bigint,
    balance_after bigint,
    job           jobs
);

-- Reads: the store's look-ups, history, audit and snapshots, and the invariant checker. Tables the
-- owner creates later are readable by the service too, and writable by nobody but the owner;
-- functions are executable by no one until their file grants them (ledgerdb/code).
DO $$
DECLARE
    schema CONSTANT text := current_schema();
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO jobbill_app', schema);
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO jobbill_app', schema);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO jobbill_app', schema);
    -- Revoking PUBLIC's EXECUTE has to be global (not IN SCHEMA): per-schema defaults can only add
    -- to the global ones.
    EXECUTE 'ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC';

    -- No schema changes by the service. PostgreSQL 15 and later no longer give PUBLIC CREATE on
    -- the public schema, but a database created under 14 or earlier and upgraded keeps it, and an
    -- operator may have granted it. Revoke where this role may; fail where it may not.
    IF has_schema_privilege('jobbill_app', schema, 'CREATE') THEN
        IF pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = schema), 'USAGE') THEN
            EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', schema);
            EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM jobbill_app', schema);
        END IF;
        IF has_schema_privilege('jobbill_app', schema, 'CREATE') THEN
            RAISE EXCEPTION 'role jobbill_app may create objects in schema %', schema
                USING HINT = format('As the schema''s owner: REVOKE CREATE ON SCHEMA %I FROM PUBLIC, jobbill_app', schema);
        END IF;
    END IF;
END
$$;

---- create above / drop below ----

-- The functions of ledgerdb/code go first: they depend on the tables and the type.
DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace LOOP
        EXECUTE format('DROP FUNCTION %s CASCADE', fn);
    END LOOP;
END
$$;
DROP TYPE ledger_job_result;
DROP TABLE ledger_code_version;
-- The tables refuse TRUNCATE and row deletes by design; dropping them is the only way back.
DROP TABLE ledger_alarms;
DROP TABLE result_reports;
DROP TABLE ledger_entries;
DROP TABLE job_requests;
DROP TABLE jobs;
DROP TABLE accounts;
