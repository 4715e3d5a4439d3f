-- Replaces an enabled endpoint's signing secret: every attempt from this commit on is signed with
-- the new one. A deleted endpoint answers disabled, an unknown one not_found, nothing written.
CREATE FUNCTION ledger_webhook_rotate_secret(p_id text, p_secret text)
RETURNS TABLE (outcome text, endpoint webhook_endpoints)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    e webhook_endpoints;
BEGIN
    UPDATE webhook_endpoints SET secret = p_secret, rotated_at = now() WHERE id = p_id AND disabled_at IS NULL RETURNING * INTO e;
    IF FOUND THEN
        RETURN QUERY SELECT 'applied'::text, e;
        RETURN;
    END IF;
    SELECT * INTO e FROM webhook_endpoints WHERE id = p_id;
    IF FOUND THEN
        RETURN QUERY SELECT 'disabled'::text, e;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'not_found'::text, NULL::webhook_endpoints;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_webhook_rotate_secret(text, text)") }}
