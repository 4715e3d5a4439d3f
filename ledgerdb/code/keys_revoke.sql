-- Revokes an API key: from this commit on, its secret authenticates nothing (the API reads the
-- table on every request, so no restart is needed). Revoking a revoked key again answers
-- already_applied with the first revocation's time and writes nothing; an ID no key has answers
-- not_found. A revocation is final (api_keys_refuse_rewrite).
CREATE FUNCTION ledger_revoke_api_key(p_id text)
RETURNS ledger_api_key_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    k api_keys;
BEGIN
    -- Two revocations at once: the second waits for the first's row lock, then finds the key
    -- revoked and falls through to already_applied.
    UPDATE api_keys SET revoked_at = now() WHERE id = p_id AND revoked_at IS NULL RETURNING * INTO k;
    IF FOUND THEN
        RETURN ROW('applied', k)::ledger_api_key_result;
    END IF;
    SELECT * INTO k FROM api_keys WHERE id = p_id;
    IF FOUND THEN
        RETURN ROW('already_applied', k)::ledger_api_key_result;
    END IF;
    RETURN ROW('not_found', NULL)::ledger_api_key_result;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_revoke_api_key(text)") }}
