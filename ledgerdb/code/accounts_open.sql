-- Opens an account with a zero balance; opening it again changes nothing.
CREATE FUNCTION ledger_open_account(p_account_id text)
RETURNS TABLE (outcome text, balance bigint)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
BEGIN
    INSERT INTO accounts (id) VALUES (p_account_id) ON CONFLICT (id) DO NOTHING;
    IF FOUND THEN
        PERFORM ledger_block_opening(p_account_id);
        RETURN QUERY SELECT 'applied'::text, 0::bigint;
    ELSE
        RETURN QUERY SELECT 'already_applied'::text, a.balance FROM accounts a WHERE a.id = p_account_id;
    END IF;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_open_account(text)") }}
