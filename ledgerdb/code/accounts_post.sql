-- Posts a grant (a top-up) or an adjustment (an operator's correction) to an account, once per
-- caller's key. The same key with the same kind and amount answers the original row; with another
-- kind or amount, a conflict. A post that would take the account's exposures out of range —
-- balance plus pending refunds above ledger_max_balance(), balance minus pending reclaims below
-- its negative — answers out_of_range and writes nothing. The sums are numeric, so that the check
-- itself cannot overflow.
-- A negative adjustment that crosses the account's low-balance threshold has its balance.low
-- derived later from its row (ledger_webhook_derive).
-- A grant creates a credit block of the given category, priority, start, expiry and cost basis
-- (the same key with other block terms is a conflict too), and pays the account's debt from it
-- first. A positive adjustment goes to the account's opening block (standing, non-expiring
-- credits), paying the debt first as well; a negative one draws in the order of spending, and on
-- the debt for what the blocks cannot cover: it records what the operator decided.
-- A grant posted p_pending (its payment not confirmed yet) makes a pending block and no row: it
-- holds no credits until ledger_settle_pending_grant confirms it, or voids it. A repeat of the key
-- answers as for a posted grant, the block's status aside.
-- The service role may call it directly, so it checks its arguments itself, as the Go code does:
-- a NULL where a value is needed, a kind other than grant or adjustment, an amount of the wrong
-- sign, a grant's unknown category, an expiry not after the block's start, a new grant whose
-- expiry has passed (it could only lapse, and must not pay a debt), a cost basis that is not a
-- finite non-negative decimal the block stores exactly (numeric(38, 18): at most 18 decimals,
-- below 10^20), or one on promotional credits — each raises SQLSTATE JB004 naming the argument as
-- the API names it (the error's COLUMN), nothing written. A grant whose start is past and whose
-- expiry is ahead is a grant like any other, spendable at once.
CREATE FUNCTION ledger_post(p_account_id text, p_kind text, p_amount bigint, p_key text, p_memo text,
                            p_category text DEFAULT 'paid', p_priority integer DEFAULT 0,
                            p_effective_at timestamptz DEFAULT NULL, p_expires_at timestamptz DEFAULT NULL,
                            p_cost_basis numeric DEFAULT NULL, p_pending boolean DEFAULT false)
RETURNS TABLE (outcome text, entry_id bigint, balance_after bigint)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    e           ledger_entries;
    acct        accounts;
    running     numeric;
    new_balance bigint;
    blk         credit_blocks;
BEGIN
    -- The arguments, before anything is read or locked.
    IF p_kind IS NULL OR p_kind NOT IN ('grant', 'adjustment') THEN
        RAISE EXCEPTION 'is %; it must be grant or adjustment', coalesce(quote_literal(p_kind), 'NULL')
            USING ERRCODE = 'JB004', COLUMN = 'kind';
    ELSIF p_amount IS NULL OR p_amount = 0 OR (p_kind = 'grant' AND p_amount < 0) THEN
        RAISE EXCEPTION 'is %; a grant must be above zero, an adjustment not zero', coalesce(p_amount::text, 'NULL')
            USING ERRCODE = 'JB004', COLUMN = 'amount';
    ELSIF p_key IS NULL THEN
        RAISE EXCEPTION 'is NULL; every post needs its idempotency key' USING ERRCODE = 'JB004', COLUMN = 'key';
    ELSIF p_pending IS NULL THEN
        RAISE EXCEPTION 'is NULL; it must say whether the payment is still to be confirmed (true) or not (false)'
            USING ERRCODE = 'JB004', COLUMN = 'pending';
    END IF;
    IF p_kind = 'grant' THEN
        IF p_category IS NULL OR p_category NOT IN ('paid', 'promotional') THEN
            RAISE EXCEPTION 'is %; it must be paid or promotional', coalesce(quote_literal(p_category), 'NULL')
                USING ERRCODE = 'JB004', COLUMN = 'category';
        ELSIF p_priority IS NULL THEN
            RAISE EXCEPTION 'is NULL; it must be a whole number (0 when none is meant)' USING ERRCODE = 'JB004', COLUMN = 'priority';
        ELSIF p_expires_at <= p_effective_at THEN
            RAISE EXCEPTION 'is %; it must be after the block''s start, %', to_char(p_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                to_char(p_effective_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') USING ERRCODE = 'JB004', COLUMN = 'expires_at';
        ELSIF p_cost_basis IS NOT NULL AND (p_cost_basis = 'NaN' OR p_cost_basis < 0 OR p_cost_basis >= 1e20
                                            OR p_cost_basis <> round(p_cost_basis, 18)) THEN
            RAISE EXCEPTION 'is %; it must be a decimal from 0 to below 10^20 with at most 18 decimals, stored exactly', p_cost_basis
                USING ERRCODE = 'JB004', COLUMN = 'cost_basis';
        ELSIF p_cost_basis IS NOT NULL AND p_category <> 'paid' THEN
            RAISE EXCEPTION 'is set on a promotional block: only paid credits have a cost' USING ERRCODE = 'JB004', COLUMN = 'cost_basis';
        END IF;
    END IF;

    -- Lock the account first: every post of a key to this account then runs one after the other,
    -- so the look-up below cannot miss a row that a concurrent post is about to write, and no
    -- transition of its jobs can move money while the exposures are checked.
    SELECT * INTO acct FROM accounts WHERE id = p_account_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unknown_account'::text, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;

    SELECT * INTO e FROM ledger_entries le WHERE le.account_id = p_account_id AND le.idempotency_key = p_key;
    IF NOT FOUND THEN
        -- A grant posted pending has a block and no row yet.
        SELECT * INTO blk FROM credit_blocks b WHERE b.account_id = p_account_id AND b.idempotency_key = p_key;
        IF FOUND AND (blk.status = 'void' OR NOT p_pending) THEN
            -- A key whose payment failed, or is still pending, bought nothing: a grant under it is
            -- not the same grant, whatever its terms.
            RETURN QUERY SELECT 'conflict'::text, NULL::bigint, acct.balance;
            RETURN;
        ELSIF FOUND THEN
            e.kind := 'grant';
            e.amount := blk.amount;
            e.block_id := blk.id;
            e.balance_after := acct.balance;
        END IF;
    END IF;
    IF FOUND THEN
        SELECT * INTO blk FROM credit_blocks b WHERE b.id = e.block_id;
        IF e.kind = p_kind AND e.amount = p_amount
           AND (e.kind <> 'grant' OR (blk.category = p_category AND blk.priority = p_priority
                AND blk.expires_at IS NOT DISTINCT FROM p_expires_at AND blk.cost_basis IS NOT DISTINCT FROM p_cost_basis
                AND (p_effective_at IS NULL OR blk.effective_at = p_effective_at))) THEN
            RETURN QUERY SELECT 'already_applied'::text, e.id, e.balance_after;
        ELSE
            RETURN QUERY SELECT 'conflict'::text, e.id, e.balance_after;
        END IF;
        RETURN;
    END IF;

    -- A new grant's expiry is checked against the clock only now: a repeat of one posted before its
    -- expiry answered above, whenever it comes.
    IF p_kind = 'grant' AND p_expires_at <= now() THEN
        RAISE EXCEPTION 'is %, in the past: a new block must expire in the future (its credits could only lapse)',
            to_char(p_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') USING ERRCODE = 'JB004', COLUMN = 'expires_at';
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

    IF p_kind = 'grant' AND p_pending THEN
        -- Its range is checked when it is paid (ledger_settle_pending_grant).
        INSERT INTO credit_blocks (account_id, category, priority, amount, remaining, effective_at, expires_at,
                                   cost_basis, memo, idempotency_key, status)
        VALUES (p_account_id, p_category, p_priority, p_amount, 0, coalesce(p_effective_at, now()), p_expires_at,
                p_cost_basis, p_memo, p_key, 'pending');
        RETURN QUERY SELECT 'applied'::text, NULL::bigint, acct.balance;
        RETURN;
    END IF;

    UPDATE accounts a SET balance = a.balance + p_amount, updated_at = now()
    WHERE a.id = p_account_id
    RETURNING a.balance INTO new_balance;

    IF p_kind = 'grant' THEN
        INSERT INTO credit_blocks (account_id, category, priority, amount, remaining, effective_at, expires_at,
                                   cost_basis, memo, idempotency_key)
        VALUES (p_account_id, p_category, p_priority, p_amount, 0, coalesce(p_effective_at, now()), p_expires_at,
                p_cost_basis, p_memo, p_key)
        RETURNING * INTO blk;
    END IF;
    INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, memo, block_id)
    VALUES (p_account_id, p_kind, p_amount, new_balance, p_key, p_memo, blk.id)
    RETURNING * INTO e;
    IF p_amount > 0 THEN
        blk.id := coalesce(blk.id, ledger_block_opening(p_account_id));
        PERFORM ledger_block_move(p_account_id, e.id, blk.id, p_amount);
        PERFORM ledger_block_pay_debt(p_account_id, e.id, blk.id);
    ELSE
        PERFORM ledger_block_draw(p_account_id, e.id, -p_amount, true);
    END IF;
    RETURN QUERY SELECT 'applied'::text, e.id, e.balance_after;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_post(text, text, bigint, text, text, text, integer, timestamptz, timestamptz, numeric, boolean)") }}
