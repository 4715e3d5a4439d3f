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
-- Rows of ledger_entries and job_requests never change; jobs and accounts change only through the
-- guarded functions, and are never deleted. No table of the four can be truncated.
{{ range $table := list "ledger_entries" "job_requests" }}
CREATE OR REPLACE TRIGGER {{ $table }}_append_only
    BEFORE UPDATE OR DELETE ON {{ $table }} FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();
{{ end }}
{{ range $table := list "jobs" "accounts" }}
CREATE OR REPLACE TRIGGER {{ $table }}_never_deleted
    BEFORE DELETE ON {{ $table }} FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();
{{ end }}
{{ range $table := list "ledger_entries" "job_requests" "jobs" "accounts" }}
CREATE OR REPLACE TRIGGER {{ $table }}_no_truncate
    BEFORE TRUNCATE ON {{ $table }} FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_rewrite();
{{ end }}
