-- Ends a console session (signing out): from this commit on its cookie authenticates nothing.
-- Ending an ended session again answers already_applied and writes nothing; a token no session
-- has answers not_found. An end is final (console_sessions_fixed_fields).
CREATE FUNCTION ledger_console_end_session(p_token_hash bytea)
RETURNS text
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
BEGIN
    UPDATE console_sessions SET ended_at = greatest(now(), created_at)
    WHERE token_hash = p_token_hash AND ended_at IS NULL;
    IF FOUND THEN
        RETURN 'applied';
    END IF;
    IF EXISTS (SELECT 1 FROM console_sessions WHERE token_hash = p_token_hash) THEN
        RETURN 'already_applied';
    END IF;
    RETURN 'not_found';
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_console_end_session(bytea)") }}
