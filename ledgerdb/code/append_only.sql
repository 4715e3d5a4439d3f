-- The append-only and remembered-IDs rules: the database itself refuses to change or remove a
-- ledger row, to delete a job (deletion is a tombstone state), an account, a job's request or a
-- price — whoever asks, the owner included. API keys are never deleted either: a revoked key stays,
-- revoked, so that the key ID in a log line always names the key that made the request.
CREATE OR REPLACE FUNCTION ledger_refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on % refused: % is append-only', TG_OP, TG_TABLE_NAME, TG_TABLE_NAME
        USING ERRCODE = 'JB001';
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_refuse_rewrite()") }}
-- Rows of ledger_entries, ledger_block_moves, job_requests, prices, webhook_events (what happened, as it was sent),
-- webhook_attempts (the delivery log) and topup_rule_changes (what the audit judges top-ups by) never change; jobs, accounts and api_keys change
-- only through the guarded functions, and are never deleted; so do credit_blocks. None of these tables can be truncated.
{{ range $table := list "ledger_entries" "ledger_block_moves" "job_requests" "prices" "webhook_events" "webhook_attempts" "topup_rule_changes" }}
CREATE OR REPLACE TRIGGER {{ $table }}_append_only
    BEFORE UPDATE OR DELETE ON {{ $table }} FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();
{{ end }}
{{ range $table := list "jobs" "accounts" "api_keys" "credit_blocks" }}
CREATE OR REPLACE TRIGGER {{ $table }}_never_deleted
    BEFORE DELETE ON {{ $table }} FOR EACH ROW EXECUTE FUNCTION ledger_refuse_rewrite();
{{ end }}
{{ range $table := list "ledger_entries" "ledger_block_moves" "job_requests" "prices" "jobs" "accounts" "api_keys" "credit_blocks" "webhook_events" "webhook_attempts" "topup_rule_changes" }}
CREATE OR REPLACE TRIGGER {{ $table }}_no_truncate
    BEFORE TRUNCATE ON {{ $table }} FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_rewrite();
{{ end }}
