-- Opens a console session for the active API key whose secret has the hash p_secret_hash: the
-- secret itself never reaches the database, nor does the session's token (p_token_hash is its
-- SHA-256). The session expires after p_lifetime, or when the key does if that is sooner, by the
-- database's clock — the one that decides expiry. A secret that is no active key's answers
-- unauthenticated and writes nothing: an unknown, expired and revoked key alike.
--
-- The key's row is read FOR SHARE, so that a revocation committing at the same instant either
-- comes first (and the session is refused) or waits for this session, which it then ends.
CREATE FUNCTION ledger_console_open_session(p_token_hash bytea, p_secret_hash bytea, p_lifetime interval)
RETURNS ledger_console_session_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    k       api_keys;
    expires timestamptz;
BEGIN
    IF p_lifetime IS NULL OR p_lifetime <= interval '0' THEN
        RAISE EXCEPTION 'a console session''s lifetime must be positive (it is %)', p_lifetime
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT * INTO k FROM api_keys
    WHERE secret_hash = p_secret_hash AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
    FOR SHARE;
    IF NOT FOUND THEN
        RETURN ROW('unauthenticated', NULL, NULL)::ledger_console_session_result;
    END IF;
    expires := least(now() + p_lifetime, k.expires_at);
    INSERT INTO console_sessions (token_hash, key_id, expires_at) VALUES (p_token_hash, k.id, expires);
    RETURN ROW('applied', k, expires)::ledger_console_session_result;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_console_open_session(bytea, bytea, interval)") }}
