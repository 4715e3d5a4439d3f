-- Sets an account's automatic top-up rule (p_mode NULL: removes it). The same rule again answers
-- already_applied; an unknown account, unknown_account; neither writes anything.
CREATE FUNCTION ledger_topup_set_rule(p_account_id text, p_threshold bigint, p_mode text, p_amount bigint, p_monthly_cap bigint)
RETURNS text
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    cur topup_rules;
BEGIN
    PERFORM 1 FROM accounts WHERE id = p_account_id;
    IF NOT FOUND THEN
        RETURN 'unknown_account';
    END IF;
    SELECT * INTO cur FROM topup_rules WHERE account_id = p_account_id FOR UPDATE;
    IF p_mode IS NULL THEN
        IF NOT FOUND THEN
            RETURN 'already_applied';
        END IF;
        DELETE FROM topup_rules WHERE account_id = p_account_id;
        RETURN 'applied';
    END IF;
    IF FOUND AND cur.threshold = p_threshold AND cur.mode = p_mode AND cur.amount = p_amount AND cur.monthly_cap = p_monthly_cap THEN
        RETURN 'already_applied';
    END IF;
    INSERT INTO topup_rules (account_id, threshold, mode, amount, monthly_cap)
    VALUES (p_account_id, p_threshold, p_mode, p_amount, p_monthly_cap)
    ON CONFLICT (account_id) DO UPDATE SET threshold = EXCLUDED.threshold, mode = EXCLUDED.mode, amount = EXCLUDED.amount,
        monthly_cap = EXCLUDED.monthly_cap, updated_at = now();
    RETURN 'applied';
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_topup_set_rule(text, bigint, text, bigint, bigint)") }}

-- The top-up a debit row asks for under its account's rule: NULL when the row is no debit, did not
-- take the balance from at or above the threshold to below it (a reclaim measured after the
-- release written with it, as balance.low measures it), the account has no rule, or the month's
-- cap is spent. p_asked_this_month is what the account's top-up requests of the debit's calendar
-- month (UTC) asked for before it: the request asks for at most the rest of the cap.
CREATE FUNCTION ledger_topup_amount(d ledger_entries, p_asked_this_month bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    rule  topup_rules;
    after bigint;
    want  bigint;
BEGIN
    IF d.amount >= 0 THEN
        RETURN NULL;
    END IF;
    SELECT * INTO rule FROM topup_rules WHERE account_id = d.account_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    after := coalesce((SELECT r.balance_after FROM ledger_entries r
                       WHERE d.kind = 'reclaim' AND r.job_id = d.job_id AND r.kind = 'release'), d.balance_after);
    IF NOT (d.balance_after - d.amount >= rule.threshold AND after < rule.threshold) THEN
        RETURN NULL;
    END IF;
    want := CASE rule.mode WHEN 'fixed' THEN rule.amount ELSE rule.amount - after END;
    want := least(want, rule.monthly_cap - coalesce(p_asked_this_month, 0));
    IF want <= 0 THEN
        RETURN NULL;
    END IF;
    RETURN want;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_topup_amount(ledger_entries, bigint)") }}

-- Settles a grant posted pending its payment (its block holds nothing yet): p_paid makes the block
-- spendable — the grant's row is written now, its credits moved in and the debt paid first, as
-- any grant's — and otherwise voids it, nothing written but its status. A block settled before
-- answers already_applied when settled the same way, conflict otherwise; an unknown key,
-- not_found. A block whose expiry passed before its payment was confirmed is voided instead,
-- marked expired (expired_at, with no row: it held nothing), and answers expired — then and to
-- every later confirmation of its payment; a later p_paid false finds it void, already_applied.
-- Answers the grant's row and the balance after it when paid. A NULL p_paid says neither, and is
-- refused (SQLSTATE JB004, COLUMN paid), nothing written.
CREATE FUNCTION ledger_settle_pending_grant(p_account_id text, p_key text, p_paid boolean)
RETURNS TABLE (outcome text, entry_id bigint, balance_after bigint)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    acct        accounts;
    blk         credit_blocks;
    e           ledger_entries;
    running     numeric;
    new_balance bigint;
BEGIN
    IF p_paid IS NULL THEN
        RAISE EXCEPTION 'is NULL; it must say whether the payment was made (true) or failed (false)'
            USING ERRCODE = 'JB004', COLUMN = 'paid';
    END IF;
    SELECT * INTO acct FROM accounts WHERE id = p_account_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unknown_account'::text, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO blk FROM credit_blocks b WHERE b.account_id = p_account_id AND b.idempotency_key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::bigint, NULL::bigint;
        RETURN;
    ELSIF blk.status = 'void' AND blk.expired_at IS NOT NULL AND p_paid THEN
        -- Its payment was confirmed too late before: the same answer again.
        RETURN QUERY SELECT 'expired'::text, NULL::bigint, acct.balance;
        RETURN;
    ELSIF blk.status <> 'pending' THEN
        SELECT * INTO e FROM ledger_entries le WHERE le.account_id = p_account_id AND le.idempotency_key = p_key;
        RETURN QUERY SELECT CASE WHEN (blk.status = 'active') = p_paid THEN 'already_applied' ELSE 'conflict' END,
                            e.id, e.balance_after;
        RETURN;
    END IF;
    IF NOT p_paid THEN
        UPDATE credit_blocks SET status = 'void' WHERE id = blk.id;
        RETURN QUERY SELECT 'applied'::text, NULL::bigint, acct.balance;
        RETURN;
    ELSIF blk.expires_at <= now() THEN
        -- Paid too late: its credits would lapse at once, and paying a debt with them would spend
        -- them after their expiry. The block is void; the payment is the payment code's to refund.
        UPDATE credit_blocks SET status = 'void', expired_at = now() WHERE id = blk.id;
        RETURN QUERY SELECT 'expired'::text, NULL::bigint, acct.balance;
        RETURN;
    END IF;
    SELECT coalesce(sum(j.cost), 0) INTO running FROM jobs j WHERE j.account_id = p_account_id AND j.state = 'running';
    IF acct.balance::numeric + blk.amount + running > ledger_max_balance() THEN
        RETURN QUERY SELECT 'out_of_range'::text, NULL::bigint, acct.balance;
        RETURN;
    END IF;
    UPDATE accounts a SET balance = a.balance + blk.amount, updated_at = now()
    WHERE a.id = p_account_id RETURNING a.balance INTO new_balance;
    UPDATE credit_blocks SET status = 'active' WHERE id = blk.id;
    INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, memo, block_id)
    VALUES (p_account_id, 'grant', blk.amount, new_balance, p_key, blk.memo, blk.id)
    RETURNING * INTO e;
    PERFORM ledger_block_move(p_account_id, e.id, blk.id, blk.amount);
    PERFORM ledger_block_pay_debt(p_account_id, e.id, blk.id);
    RETURN QUERY SELECT 'applied'::text, e.id, e.balance_after;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_settle_pending_grant(text, text, boolean)") }}

-- The top-ups the given rows ask for (ledger_topup_amount), one per debit that crossed its
-- account's threshold, in row order: each month's cap counts the top-ups its account's earlier
-- topup.requested events asked for and those of the rows before it here, so that two crossings read
-- in one pass never ask past the cap together. A row whose event exists already (a replay) answers
-- what its event asked.
CREATE FUNCTION ledger_topup_requests(p_entries bigint[])
RETURNS TABLE (entry_id bigint, amount bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    d      ledger_entries;
    month  timestamp;
    asked  bigint;
    prior  jsonb;
    extra  jsonb := '{}';
    key    text;
BEGIN
    FOR d IN SELECT * FROM ledger_entries e WHERE e.id = ANY (p_entries) AND e.amount < 0 ORDER BY e.id LOOP
        SELECT w.payload INTO prior FROM webhook_events w WHERE w.entry_id = d.id AND w.type = 'topup.requested';
        IF FOUND THEN
            entry_id := d.id;
            amount := (prior->>'amount')::bigint;
            RETURN NEXT;
            CONTINUE;
        END IF;
        month := date_trunc('month', d.created_at AT TIME ZONE 'UTC');
        key := d.account_id || '/' || month::text;
        SELECT coalesce(sum((w.payload->>'amount')::bigint), 0) INTO asked FROM webhook_events w
        WHERE w.account_id = d.account_id AND w.type = 'topup.requested'
          AND date_trunc('month', w.created_at AT TIME ZONE 'UTC') = month;
        asked := asked + coalesce((extra->>key)::bigint, 0);
        amount := ledger_topup_amount(d, asked);
        IF amount IS NOT NULL THEN
            entry_id := d.id;
            extra := jsonb_set(extra, ARRAY[key], to_jsonb(coalesce((extra->>key)::bigint, 0) + amount));
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_topup_requests(bigint[])") }}
