-- Sets an account's low-balance threshold (NULL: none). The same threshold again answers
-- already_applied; an unknown account, unknown_account; neither writes anything.
CREATE FUNCTION ledger_webhook_set_low_balance(p_account_id text, p_threshold bigint)
RETURNS text
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    current bigint;
BEGIN
    PERFORM 1 FROM accounts WHERE id = p_account_id;
    IF NOT FOUND THEN
        RETURN 'unknown_account';
    END IF;
    SELECT threshold INTO current FROM webhook_low_balance WHERE account_id = p_account_id FOR UPDATE;
    IF current IS NOT DISTINCT FROM p_threshold THEN
        RETURN 'already_applied';
    ELSIF p_threshold IS NULL THEN
        DELETE FROM webhook_low_balance WHERE account_id = p_account_id;
    ELSE
        INSERT INTO webhook_low_balance (account_id, threshold) VALUES (p_account_id, p_threshold)
        ON CONFLICT (account_id) DO UPDATE SET threshold = EXCLUDED.threshold, updated_at = now();
    END IF;
    RETURN 'applied';
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_webhook_set_low_balance(text, bigint)") }}
