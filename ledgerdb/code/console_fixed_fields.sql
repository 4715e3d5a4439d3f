-- A console session's end is final, and nothing else of it ever changes: its token's hash, its
-- key, its creation and its expiry are fixed when it is opened. Were an ended session's ended_at
-- cleared, or its expiry moved, or its key swapped for a wider one, a browser signed out (or a
-- stolen cookie) would work again. Whoever asks is refused, the owner included.
CREATE OR REPLACE FUNCTION console_sessions_refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.token_hash, NEW.key_id, NEW.created_at, NEW.expires_at)
       IS DISTINCT FROM (OLD.token_hash, OLD.key_id, OLD.created_at, OLD.expires_at) THEN
        RAISE EXCEPTION 'console session: only its end may change; sign in again instead'
            USING ERRCODE = 'JB002';
    END IF;
    IF OLD.ended_at IS NOT NULL AND NEW.ended_at IS DISTINCT FROM OLD.ended_at THEN
        RAISE EXCEPTION 'console session: its end is final'
            USING ERRCODE = 'JB002';
    END IF;
    RETURN NEW;
END
$$;
{{ template "nobody_may_call" (dict "fn" "console_sessions_refuse_rewrite()") }}
CREATE OR REPLACE TRIGGER console_sessions_fixed_fields
    BEFORE UPDATE ON console_sessions FOR EACH ROW EXECUTE FUNCTION console_sessions_refuse_rewrite();
