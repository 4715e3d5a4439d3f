-- An API key's revocation is final, and nothing else of it ever changes: its secret's hash, scope,
-- account, name, creation and expiry are fixed when it is created. Were a revoked key's
-- revoked_at cleared, or its scope widened, a secret an operator took away would work again, or
-- do more than it was given for. Whoever asks is refused, the owner included.
CREATE OR REPLACE FUNCTION api_keys_refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.id, NEW.secret_hash, NEW.scope, NEW.account_id, NEW.name, NEW.created_at, NEW.expires_at)
       IS DISTINCT FROM (OLD.id, OLD.secret_hash, OLD.scope, OLD.account_id, OLD.name, OLD.created_at, OLD.expires_at) THEN
        RAISE EXCEPTION 'API key %: only its revocation may change; create a new key instead', OLD.id
            USING ERRCODE = 'JB002';
    END IF;
    IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
        RAISE EXCEPTION 'API key %: a revocation is final', OLD.id
            USING ERRCODE = 'JB002';
    END IF;
    RETURN NEW;
END
$$;
{{ template "nobody_may_call" (dict "fn" "api_keys_refuse_rewrite()") }}
CREATE OR REPLACE TRIGGER api_keys_fixed_fields
    BEFORE UPDATE ON api_keys FOR EACH ROW EXECUTE FUNCTION api_keys_refuse_rewrite();
