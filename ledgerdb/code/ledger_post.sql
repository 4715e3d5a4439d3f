-- Posts a grant (a top-up) or an adjustment (an operator's correction) to an account, once per
-- caller's key. The same key with the same kind and amount answers the original row; with another
-- kind or amount, a conflict. A post that would take the account's exposures out of range —
-- balance plus pending refunds above ledger_max_balance(), balance minus pending reclaims below
-- its negative — answers out_of_range and writes nothing. The sums are numeric, so that the check
-- itself cannot overflow.
-- A negative adjustment that crosses the account's low-balance threshold has its balance.low
-- derived later from its row (ledger_webhook_derive).
CREATE FUNCTION ledger_post(p_account_id text, p_kind text, p_amount bigint, p_key text, p_memo text)
RETURNS TABLE (outcome text, entry_id bigint, balance_after bigint)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    e           ledger_entries;
    acct        accounts;
    running     numeric;
    new_balance bigint;
BEGIN
    -- Lock the account first: every post of a key to this account then runs one after the other,
    -- so the look-up below cannot miss a row that a concurrent post is about to write, and no
    -- transition of its jobs can move money while the exposures are checked.
    SELECT * INTO acct FROM accounts WHERE id = p_account_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unknown_account'::text, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;

    SELECT * INTO e FROM ledger_entries le WHERE le.account_id = p_account_id AND le.idempotency_key = p_key;
    IF FOUND THEN
        IF e.kind = p_kind AND e.amount = p_amount THEN
            RETURN QUERY SELECT 'already_applied'::text, e.id, e.balance_after;
        ELSE
            RETURN QUERY SELECT 'conflict'::text, e.id, e.balance_after;
        END IF;
        RETURN;
    END IF;

    IF p_amount > 0 THEN
        SELECT coalesce(sum(j.cost), 0) INTO running FROM jobs j
        WHERE j.account_id = p_account_id AND j.state = 'running';
        IF acct.balance::numeric + p_amount + running > ledger_max_balance() THEN
            RETURN QUERY SELECT 'out_of_range'::text, NULL::bigint, acct.balance;
            RETURN;
        END IF;
    ELSIF acct.balance::numeric + p_amount - acct.awaiting_reclaim < -ledger_max_balance() THEN
        RETURN QUERY SELECT 'out_of_range'::text, NULL::bigint, acct.balance;
        RETURN;
    END IF;

    UPDATE accounts a SET balance = a.balance + p_amount, updated_at = now()
    WHERE a.id = p_account_id
    RETURNING a.balance INTO new_balance;

    INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, memo)
    VALUES (p_account_id, p_kind, p_amount, new_balance, p_key, p_memo)
    RETURNING * INTO e;
    RETURN QUERY SELECT 'applied'::text, e.id, e.balance_after;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_post(text, text, bigint, text, text)") }}
