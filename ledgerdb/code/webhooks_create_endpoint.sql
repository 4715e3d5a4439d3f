-- The service's role may read webhook_endpoints and change it only through this function and
-- ledger_webhook_disable_endpoint and ledger_webhook_rotate_secret. The caller (package webhooks)
-- makes the endpoint's ID and secret and checks the URL against its address rules; the table's
-- constraints refuse what cannot be an endpoint.
--
-- Creates an endpoint for an account. An account that does not exist answers unknown_account; one
-- that already has 10 enabled endpoints (each event is sent to every one) answers too_many; neither
-- writes anything.
CREATE FUNCTION ledger_webhook_create_endpoint(p_id text, p_account_id text, p_url text, p_secret text, p_description text)
RETURNS TABLE (outcome text, endpoint webhook_endpoints)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    e webhook_endpoints;
BEGIN
    PERFORM 1 FROM accounts WHERE id = p_account_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unknown_account'::text, NULL::webhook_endpoints;
        RETURN;
    END IF;
    -- Two creations for one account run one after the other, so the count below is exact; a
    -- lock of its own rather than the account's row, which every charge of the account updates.
    PERFORM pg_advisory_xact_lock(hashtext('webhook_endpoints/' || p_account_id));
    IF (SELECT count(*) FROM webhook_endpoints w WHERE w.account_id = p_account_id AND w.disabled_at IS NULL)
       >= 10 THEN
        RETURN QUERY SELECT 'too_many'::text, NULL::webhook_endpoints;
        RETURN;
    END IF;
    INSERT INTO webhook_endpoints (id, account_id, url, secret, description)
    VALUES (p_id, p_account_id, p_url, p_secret, coalesce(p_description, ''))
    RETURNING * INTO e;
    RETURN QUERY SELECT 'applied'::text, e;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_webhook_create_endpoint(text, text, text, text, text)") }}
