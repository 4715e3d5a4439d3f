-- Money rules 1 and 7: the database itself refuses to change or remove a ledger row, to delete a
-- job (deletion is a tombstone state), an account, or a job's request — whoever asks, the owner
-- included.
CREATE OR REPLACE FUNCTION ledger_refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on % refused: % is append-only', TG_OP, TG_TABLE_NAME, TG_TABLE_NAME
        USING ERRCODE = 'JB001';
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_refuse_rewrite()") }}
CREATE OR REPLACE TRIGGER ledger_entries_append_only
    BEFORE UPDATE OR DELETE ON ledger_entries FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();
CREATE OR REPLACE TRIGGER ledger_entries_no_truncate
    BEFORE TRUNCATE ON ledger_entries FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_rewrite();
CREATE OR REPLACE TRIGGER jobs_never_deleted
    BEFORE DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();
CREATE OR REPLACE TRIGGER jobs_no_truncate
    BEFORE TRUNCATE ON jobs FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_rewrite();
CREATE OR REPLACE TRIGGER job_requests_append_only
    BEFORE UPDATE OR DELETE ON job_requests FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();
CREATE OR REPLACE TRIGGER job_requests_no_truncate
    BEFORE TRUNCATE ON job_requests FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_rewrite();
CREATE OR REPLACE TRIGGER accounts_never_deleted
    BEFORE DELETE ON accounts FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();
CREATE OR REPLACE TRIGGER accounts_no_truncate
    BEFORE TRUNCATE ON accounts FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_rewrite();
