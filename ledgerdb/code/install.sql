-- Installs every function of the ledger, one file each in this directory, after every migration
-- (ledgerdb.Migrate), in one transaction under the migrations' advisory lock: a change to a money
-- function is an ordinary diff of its file.
--
-- A file is named by its concern, the function inside by what it does (ledger_*, the name the
-- Go code calls): jobs_ the money transitions of a job and its price, result and alarms; blocks_
-- the credit blocks' moves and expiry; accounts_ opening, posting to and topping up an account;
-- keys_ and console_ API keys and console sessions; webhooks_ the events and their delivery;
-- reports_ the statement and the revenue report; audit_ what the audit and the invariant checker
-- read beside the rows; append_only.sql and the *_fixed_fields.sql the triggers that refuse a
-- rewrite of history; security.sql who may call what. The files are included below in the order
-- their functions depend on one another. A file's name is in none of the SQL rendered, so
-- renaming one alone changes nothing installed.
--
-- This directory is the whole set: the ledger's functions of the schema are dropped first and
-- created again from the files, so that a function renamed, removed or given new arguments leaves
-- nothing behind (CREATE OR REPLACE would keep the old signature beside the new one, and cannot
-- change a return type). The trigger functions are replaced instead, since their triggers depend on
-- them. The service never sees the gap: the transaction commits all of it or nothing.
--
-- Template data: .schema is the schema's name, quoted as an identifier.

DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname LIKE 'ledger\_%'
          AND p.prorettype <> 'trigger'::regtype
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('DROP FUNCTION %s', fn);
    END LOOP;
END
$$;

{{ template "append_only.sql" . }}
{{ template "jobs_fixed_fields.sql" . }}
{{ template "keys_fixed_fields.sql" . }}
{{ template "console_fixed_fields.sql" . }}
{{ template "accounts_max_balance.sql" . }}
{{ template "jobs_result_of.sql" . }}
{{ template "jobs_unmatched.sql" . }}
{{ template "jobs_set_price.sql" . }}
{{ template "jobs_submit.sql" . }}
{{ template "blocks_moves.sql" . }}
{{ template "jobs_charge.sql" . }}
{{ template "jobs_refund.sql" . }}
{{ template "jobs_deliver_running.sql" . }}
{{ template "jobs_reclaim.sql" . }}
{{ template "jobs_deliver.sql" . }}
{{ template "jobs_settle.sql" . }}
{{ template "jobs_record_attempt.sql" . }}
{{ template "jobs_delete.sql" . }}
{{ template "jobs_reject_orphan.sql" . }}
{{ template "accounts_open.sql" . }}
{{ template "accounts_post.sql" . }}
{{ template "blocks_expire.sql" . }}
{{ template "accounts_topup.sql" . }}
{{ template "jobs_record_result.sql" . }}
{{ template "jobs_mark_result_applied.sql" . }}
{{ template "jobs_raise_alarm.sql" . }}
{{ template "keys_create.sql" . }}
{{ template "keys_revoke.sql" . }}
{{ template "console_open_session.sql" . }}
{{ template "console_end_session.sql" . }}
{{ template "webhooks_create_endpoint.sql" . }}
{{ template "webhooks_disable_endpoint.sql" . }}
{{ template "webhooks_rotate_secret.sql" . }}
{{ template "webhooks_set_low_balance.sql" . }}
{{ template "webhooks_job_events.sql" . }}
{{ template "webhooks_time.sql" . }}
{{ template "webhooks_materialize.sql" . }}
{{ template "webhooks_derive.sql" . }}
{{ template "webhooks_claim.sql" . }}
{{ template "webhooks_record_attempt.sql" . }}
{{ template "webhooks_replay.sql" . }}
{{ template "reports_statement.sql" . }}
{{ template "reports_revenue.sql" . }}
{{ template "audit_snapshot.sql" . }}
{{ template "audit_blocks.sql" . }}
