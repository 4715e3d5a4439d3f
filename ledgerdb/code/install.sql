-- Installs every function of the ledger, one file each in this directory, after every migration
-- (ledgerdb.Migrate), in one transaction under the migrations' advisory lock: a change to a money
-- function is an ordinary diff of its file.
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

{{ template "refuse_rewrite.sql" . }}
{{ template "jobs_fixed_fields.sql" . }}
{{ template "api_keys_fixed_fields.sql" . }}
{{ template "console_sessions_fixed_fields.sql" . }}
{{ template "ledger_max_balance.sql" . }}
{{ template "ledger_job_result_of.sql" . }}
{{ template "ledger_job_unmatched.sql" . }}
{{ template "ledger_set_price.sql" . }}
{{ template "ledger_submit.sql" . }}
{{ template "ledger_blocks.sql" . }}
{{ template "ledger_charge.sql" . }}
{{ template "ledger_refund.sql" . }}
{{ template "ledger_deliver_running.sql" . }}
{{ template "ledger_reclaim.sql" . }}
{{ template "ledger_deliver.sql" . }}
{{ template "ledger_settle.sql" . }}
{{ template "ledger_record_attempt.sql" . }}
{{ template "ledger_delete.sql" . }}
{{ template "ledger_reject_orphan.sql" . }}
{{ template "ledger_open_account.sql" . }}
{{ template "ledger_post.sql" . }}
{{ template "ledger_expire_blocks.sql" . }}
{{ template "ledger_topup.sql" . }}
{{ template "ledger_record_result.sql" . }}
{{ template "ledger_mark_result_applied.sql" . }}
{{ template "ledger_raise_alarm.sql" . }}
{{ template "ledger_create_api_key.sql" . }}
{{ template "ledger_revoke_api_key.sql" . }}
{{ template "ledger_console_open_session.sql" . }}
{{ template "ledger_console_end_session.sql" . }}
{{ template "ledger_webhook_create_endpoint.sql" . }}
{{ template "ledger_webhook_disable_endpoint.sql" . }}
{{ template "ledger_webhook_rotate_secret.sql" . }}
{{ template "ledger_webhook_set_low_balance.sql" . }}
{{ template "ledger_webhook_job_events.sql" . }}
{{ template "ledger_webhook_time.sql" . }}
{{ template "ledger_webhook_materialize.sql" . }}
{{ template "ledger_webhook_derive.sql" . }}
{{ template "ledger_webhook_claim.sql" . }}
{{ template "ledger_webhook_record_attempt.sql" . }}
{{ template "ledger_webhook_replay.sql" . }}
{{ template "reports_statement.sql" . }}
{{ template "reports_revenue.sql" . }}
