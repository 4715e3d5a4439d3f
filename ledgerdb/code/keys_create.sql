-- Creates an API key from the SHA-256 of its secret: the secret itself never reaches the
-- database. The caller (package apikeys) generates the key's ID and secret; an account that does
-- not exist answers unknown_account and writes nothing. The table's constraints refuse the rest of
-- what cannot be a key — an unknown scope, a customer key without its account or another key with
-- one, an empty name — and an expiry that is not in the future is refused here, by the
-- database's clock, the one clock that decides whether a key has expired.
--
-- The service may call it: an admin key creates keys through the API. That gives the service no
-- power it lacked, since an admin key may already do anything a key can.
CREATE FUNCTION ledger_create_api_key(p_id text, p_secret_hash bytea, p_scope text, p_account_id text,
                                      p_name text, p_expires_at timestamptz)
RETURNS ledger_api_key_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    k api_keys;
BEGIN
    IF p_expires_at IS NOT NULL AND p_expires_at <= now() THEN
        RAISE EXCEPTION 'an API key''s expiry must be in the future (it is %)', p_expires_at
            USING ERRCODE = 'check_violation';
    END IF;
    IF p_account_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM accounts WHERE id = p_account_id) THEN
        RETURN ROW('unknown_account', NULL)::ledger_api_key_result;
    END IF;
    INSERT INTO api_keys (id, secret_hash, scope, account_id, name, expires_at)
    VALUES (p_id, p_secret_hash, p_scope, p_account_id, p_name, p_expires_at)
    RETURNING * INTO k;
    RETURN ROW('applied', k)::ledger_api_key_result;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_create_api_key(text, bytea, text, text, text, timestamptz)") }}
