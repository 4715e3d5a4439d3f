-- Deletes an endpoint: nothing is sent to it from this commit on — its pending deliveries are
-- cancelled — and its row and delivery log stay.
-- Deleting it again answers already_applied; an ID no endpoint has, not_found.
CREATE FUNCTION ledger_webhook_disable_endpoint(p_id text)
RETURNS TABLE (outcome text, endpoint webhook_endpoints)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    e webhook_endpoints;
BEGIN
    UPDATE webhook_endpoints SET disabled_at = now() WHERE id = p_id AND disabled_at IS NULL RETURNING * INTO e;
    IF FOUND THEN
        -- What was still queued for it will never be sent: cancelled, so that no worker keeps
        -- looking at it. An attempt in flight still logs itself, and one the receiver took marks
        -- its delivery delivered (ledger_webhook_record_attempt).
        UPDATE webhook_deliveries SET status = 'cancelled', finished_at = now(), leased_until = NULL, lease_token = NULL
        WHERE endpoint_id = p_id AND status = 'pending';
        RETURN QUERY SELECT 'applied'::text, e;
        RETURN;
    END IF;
    SELECT * INTO e FROM webhook_endpoints WHERE id = p_id;
    IF FOUND THEN
        RETURN QUERY SELECT 'already_applied'::text, e;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'not_found'::text, NULL::webhook_endpoints;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_webhook_disable_endpoint(text)") }}
