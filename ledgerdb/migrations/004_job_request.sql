-- Keep the submitted request itself, not only its fingerprint: a dead letter re-driven after its
-- workflow closed must run the work on the input it was submitted with, and the ledger is the one
-- record that outlives Temporal's history retention. Like the cost, it is fixed at submission.
ALTER TABLE jobs ADD COLUMN request bytea;

CREATE OR REPLACE FUNCTION jobs_refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id <> OLD.id OR NEW.account_id <> OLD.account_id OR NEW.cost <> OLD.cost
        OR NEW.request_fingerprint <> OLD.request_fingerprint
        OR NEW.request IS DISTINCT FROM OLD.request THEN
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

DROP FUNCTION ledger_submit(text, text, bigint, bytea);

CREATE FUNCTION ledger_submit(p_job_id text, p_account_id text, p_cost bigint, p_fingerprint bytea, p_request bytea)
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
        INSERT INTO jobs (id, account_id, cost, request_fingerprint, request)
        VALUES (p_job_id, p_account_id, p_cost, p_fingerprint, p_request)
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

---- create above / drop below ----

DROP FUNCTION ledger_submit(text, text, bigint, bytea, bytea);

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

CREATE OR REPLACE FUNCTION jobs_refuse_rewrite() RETURNS trigger
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

ALTER TABLE jobs DROP COLUMN request;
