-- Least privilege: the service connects as the role jobbill_app, which may read the ledger and
-- call the money functions, and nothing else. It cannot INSERT, UPDATE or DELETE a row of any
-- table, TRUNCATE one, or create, alter or drop anything. Migrations run as the schema's owner
-- (the role that runs this file, jobbill locally), which the service never connects as.
--
-- Why SECURITY DEFINER rather than table grants: every money movement is already one of these
-- functions (001, money rule 4). Run as the caller, they would need INSERT on ledger_entries and
-- UPDATE on accounts and jobs, and with those the service could write a ledger row outside any
-- guard or set a balance to any number (money rules 2, 5 and 6), with no trigger to stop it. Run
-- as their owner, the guarded functions are the only door: the service role holds EXECUTE on
-- them and SELECT on the tables. Each one pins search_path (schema first, pg_temp last), so a
-- caller cannot shadow a table with a temporary one of the same name and steer the owner's
-- writes.
--
-- The role is created outside the migrations (scripts/ensure-postgres.sh; the compose file's
-- Postgres init script), because creating roles takes CREATEROLE, which the owner should not
-- have. Its name is fixed. On a database whose operator logs the service in under another name,
-- create jobbill_app NOLOGIN and GRANT jobbill_app TO that login: members inherit the
-- privileges. When the role is missing this migration fails, saying so, rather than recording
-- itself as applied with no grants made (the service would then fail later, at its first call,
-- far from the cause).
--
-- THE RULE FOR LATER MIGRATIONS (ledgerdb/privileges_test.go checks it on the migrated schema):
--   * A new table is readable by jobbill_app through the default privileges set below, and
--     writable by nobody but the owner. Do not GRANT INSERT, UPDATE or DELETE to jobbill_app.
--   * A new function the service calls is created SECURITY DEFINER SET search_path = <the
--     schema>, pg_temp, and gets GRANT EXECUTE ... TO jobbill_app in the same migration; new
--     functions are executable by no one else (default privileges below revoke PUBLIC's EXECUTE).
--   * CREATE OR REPLACE FUNCTION resets SECURITY DEFINER and SET to what the statement says:
--     repeat both when replacing one of the functions below, or the service loses it (42501).

DO $$
DECLARE
    app    CONSTANT text := 'jobbill_app';
    schema CONSTANT text := current_schema();
    fn     text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = app) THEN
        RAISE EXCEPTION 'role % does not exist', app
            USING HINT = 'Run scripts/ensure-postgres.sh, or CREATE ROLE jobbill_app (LOGIN, or NOLOGIN '
                         'granted to the service''s login role), then migrate again.';
    END IF;

    -- Writing functions run as the owner, search_path pinned.
    FOREACH fn IN ARRAY ARRAY[
        'ledger_submit(text, text, bigint, bytea, bytea)',
        'ledger_charge(text)',
        'ledger_refund(text, text, integer)',
        'ledger_reclaim(text)',
        'ledger_deliver(text, integer)',
        'ledger_record_attempt(text, integer)',
        'ledger_delete(text)',
        'ledger_open_account(text)',
        'ledger_post(text, text, bigint, text, text)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', fn, schema);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn, app);
    END LOOP;

    -- Read-only helpers stay SECURITY INVOKER: the service calls ledger_job_unmatched directly as
    -- a read (Store.Job), and it calls ledger_job_result_of; SELECT is all they need.
    FOREACH fn IN ARRAY ARRAY[
        'ledger_job_unmatched(text, text[])',
        'ledger_job_result_of(text, bigint, bigint, jobs)'
    ] LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn, app);
    END LOOP;

    -- Trigger functions fire whoever writes; nobody needs to call them.
    EXECUTE 'REVOKE ALL ON FUNCTION ledger_refuse_rewrite() FROM PUBLIC';
    EXECUTE 'REVOKE ALL ON FUNCTION jobs_refuse_rewrite() FROM PUBLIC';

    -- Reads: the store's look-ups, history, audit and snapshots, and the invariant checker.
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', schema, app);
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', schema, app);
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO %I', schema, app);

    -- Future objects created by the owner (whoever runs the migrations): tables readable by the
    -- service, functions executable by no one until a migration grants them. Revoking PUBLIC's
    -- EXECUTE has to be global (not IN SCHEMA): per-schema defaults can only add to the global ones.
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO %I', schema, app);
    EXECUTE 'ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC';

    -- No schema changes by the service. PostgreSQL 15 and later no longer give PUBLIC CREATE on
    -- the public schema, but a database created under 14 or earlier and upgraded keeps it, and
    -- an operator may have granted it. Revoke where this role may; fail where it may not.
    IF has_schema_privilege(app, schema, 'CREATE') THEN
        IF pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = schema), 'USAGE') THEN
            EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', schema);
            EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM %I', schema, app);
        END IF;
        IF has_schema_privilege(app, schema, 'CREATE') THEN
            RAISE EXCEPTION 'role % may create objects in schema %', app, schema
                USING HINT = format('As the schema''s owner: REVOKE CREATE ON SCHEMA %I FROM PUBLIC, %I', schema, app);
        END IF;
    END IF;
END
$$;

---- create above / drop below ----

DO $$
DECLARE
    app    CONSTANT text := 'jobbill_app';
    schema CONSTANT text := current_schema();
    fn     text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'ledger_submit(text, text, bigint, bytea, bytea)',
        'ledger_charge(text)',
        'ledger_refund(text, text, integer)',
        'ledger_reclaim(text)',
        'ledger_deliver(text, integer)',
        'ledger_record_attempt(text, integer)',
        'ledger_delete(text)',
        'ledger_open_account(text)',
        'ledger_post(text, text, bigint, text, text)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY INVOKER RESET search_path', fn);
    END LOOP;
    EXECUTE 'ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC';
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %I TO PUBLIC', schema);
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = app) THEN
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I REVOKE SELECT ON TABLES FROM %I', schema, app);
        EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA %I FROM %I', schema, app);
        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', schema, app);
        EXECUTE format('REVOKE ALL ON SCHEMA %I FROM %I', schema, app);
    END IF;
END
$$;
