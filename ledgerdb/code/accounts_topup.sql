-- Sets an account's automatic top-up rule (p_mode NULL: removes it). The same rule again answers
-- already_applied; an unknown account, unknown_account; neither writes anything. Every change is
-- also kept in topup_rule_changes, which the audit judges requests by. A change of the terms keeps
-- the rule's created_at (the debits it may judge begin there); a removal and a new rule start
-- another.
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
    -- The row lock also waits for a derivation of the account's requests under way
    -- (ledger_webhook_materialize_topups): the rule never changes under one.
    SELECT * INTO cur FROM topup_rules WHERE account_id = p_account_id FOR UPDATE;
    IF p_mode IS NULL THEN
        IF NOT FOUND THEN
            RETURN 'already_applied';
        END IF;
        DELETE FROM topup_rules WHERE account_id = p_account_id;
        INSERT INTO topup_rule_changes (account_id) VALUES (p_account_id);
        RETURN 'applied';
    END IF;
    IF FOUND AND cur.threshold = p_threshold AND cur.mode = p_mode AND cur.amount = p_amount AND cur.monthly_cap = p_monthly_cap THEN
        RETURN 'already_applied';
    END IF;
    INSERT INTO topup_rules (account_id, threshold, mode, amount, monthly_cap)
    VALUES (p_account_id, p_threshold, p_mode, p_amount, p_monthly_cap)
    ON CONFLICT (account_id) DO UPDATE SET threshold = EXCLUDED.threshold, mode = EXCLUDED.mode, amount = EXCLUDED.amount,
        monthly_cap = EXCLUDED.monthly_cap, updated_at = now();
    INSERT INTO topup_rule_changes (account_id, threshold, mode, amount, monthly_cap)
    VALUES (p_account_id, p_threshold, p_mode, p_amount, p_monthly_cap);
    RETURN 'applied';
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_topup_set_rule(text, bigint, text, bigint, bigint)") }}

-- The top-up a row asks for under its account's rule. Only a spend asks: a debit that takes the
-- balance down — a charge, a reclaim, a negative adjustment, an expiry by the expiry pass —, made
-- at or after the rule was made (topup_rules.created_at, which a change of the rule keeps), that
-- took the balance from at or above the threshold to below it (a reclaim measured after the
-- release written with it, as balance.low measures it). Never a credit, and never an expiry a
-- refund or a release caused (caused_by): it removes no more than that row returned, so together
-- they spent nothing. NULL when the row asks nothing, the account has no rule, or the month's cap
-- is spent. p_asked_this_month is what the account's top-up requests of the row's calendar month
-- (UTC) asked for before it: the request asks for at most the rest of the cap.
CREATE FUNCTION ledger_topup_amount(d ledger_entries, p_asked_this_month bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    rule  topup_rules;
    after bigint;
    want  bigint;
BEGIN
    IF d.amount >= 0 OR d.caused_by IS NOT NULL THEN
        RETURN NULL;
    END IF;
    SELECT * INTO rule FROM topup_rules WHERE account_id = d.account_id;
    IF NOT FOUND OR d.created_at < rule.created_at THEN
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

-- The top-ups the given rows of the given accounts ask for (ledger_topup_amount) that no
-- topup.requested event asked yet, in row order: each month's cap counts what the account's
-- topup.requested events of that month asked for and what the rows before it here ask, so that
-- two crossings read together never ask past the cap. The caller holds the accounts' rules
-- (ledger_webhook_materialize_topups), and reads in a snapshot taken after it took them: the
-- events another derivation wrote under them are all counted.
CREATE FUNCTION ledger_topup_requests(p_entries bigint[], p_accounts text[])
RETURNS TABLE (entry_id bigint, amount bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    d     ledger_entries;
    key   text;
    -- What each account's month has asked so far, by "<account>/<month>".
    asked jsonb := '{}';
BEGIN
    FOR d IN SELECT e.* FROM ledger_entries e JOIN topup_rules t ON t.account_id = e.account_id
             WHERE e.id = ANY (p_entries) AND e.account_id = ANY (p_accounts)
               AND e.amount < 0 AND e.caused_by IS NULL AND e.created_at >= t.created_at
               AND NOT EXISTS (SELECT 1 FROM webhook_events w WHERE w.entry_id = e.id AND w.type = 'topup.requested')
             ORDER BY e.id LOOP
        key := d.account_id || '/' || date_trunc('month', d.created_at AT TIME ZONE 'UTC')::text;
        IF NOT asked ? key THEN
            asked := asked || jsonb_build_object(key, (
                SELECT coalesce(sum((w.payload->>'amount')::bigint), 0) FROM webhook_events w
                WHERE w.account_id = d.account_id AND w.type = 'topup.requested'
                  AND date_trunc('month', w.created_at AT TIME ZONE 'UTC') = date_trunc('month', d.created_at AT TIME ZONE 'UTC')));
        END IF;
        amount := ledger_topup_amount(d, (asked->>key)::bigint);
        IF amount IS NOT NULL THEN
            entry_id := d.id;
            asked := asked || jsonb_build_object(key, (asked->>key)::bigint + amount);
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_topup_requests(bigint[], text[])") }}

-- The account's topup.requested events that its rules never allowed, each as a sentence naming the
-- event and its row, in event order: a request by a row that is not a spend of the account (a
-- credit; an expiry a refund or a release caused, which removed no more than that row returned; a
-- row of another account, or none), by a spend written when the account had no rule (its last
-- change in topup_rule_changes at or before the row's time removed it, or there is none), asking
-- for nothing, or taking its month's requests, counted in event order, past the cap it was asked
-- within (the monthly_cap it names; the account's rule's for a request from before requests named
-- it). The derivation writes an account's requests one derivation at a time, so event order is the
-- order they were asked in. Read by the audit (ledgerdb.Store.Audit) and by the invariant
-- checker's snapshot, in their own snapshots; it writes nothing, and runs as the owner only as
-- every function the service calls does.
CREATE FUNCTION ledger_topup_audit(p_account_id text)
RETURNS TABLE (event_seq bigint, problem text)
LANGUAGE sql STABLE {{ template "run_as_owner" . }} AS $$
    WITH requests AS (
        SELECT w.seq, w.id, w.entry_id, (w.payload->>'amount')::bigint AS amount,
               coalesce((w.payload->>'monthly_cap')::bigint, r.monthly_cap) AS cap,
               to_char(w.created_at AT TIME ZONE 'UTC', 'YYYY-MM') AS month
        FROM webhook_events w LEFT JOIN topup_rules r ON r.account_id = w.account_id
        WHERE w.account_id = p_account_id AND w.type = 'topup.requested'
    ), running AS (
        SELECT q.*, sum(q.amount) OVER (PARTITION BY q.month ORDER BY q.seq) AS asked FROM requests q
    ), problems AS (
        SELECT q.seq, CASE
            WHEN d.id IS NULL OR d.account_id <> p_account_id THEN
                format('row %s is not one of the account''s', q.entry_id)
            WHEN d.amount >= 0 THEN
                format('row %s (%s %s) is a credit, not a spend', d.id, d.kind, d.amount)
            WHEN d.caused_by IS NOT NULL THEN
                format('row %s (%s %s) removed credits that row %s returned to an expired block: nothing was spent',
                       d.id, d.kind, d.amount, d.caused_by)
            WHEN NOT coalesce((SELECT c.mode IS NOT NULL FROM topup_rule_changes c
                               WHERE c.account_id = p_account_id AND c.changed_at <= d.created_at
                               ORDER BY c.changed_at DESC, c.id DESC LIMIT 1), false) THEN
                format('row %s (%s %s) was written at %s, when the account had no top-up rule', d.id, d.kind, d.amount, d.created_at)
            WHEN q.amount IS NULL OR q.amount <= 0 THEN
                format('it asks for %s credits', coalesce(q.amount::text, 'no'))
        END AS problem
        FROM running q LEFT JOIN ledger_entries d ON d.id = q.entry_id
        UNION ALL
        SELECT q.seq, format('the requests of %s ask for %s credits with this one, past the month''s cap of %s', q.month, q.asked, q.cap)
        FROM running q WHERE q.asked > q.cap
    )
    SELECT p.seq, format('top-up request %s (row %s): %s', q.id, q.entry_id, p.problem)
    FROM problems p JOIN requests q ON q.seq = p.seq
    WHERE p.problem IS NOT NULL
    ORDER BY p.seq
$$;
{{ template "service_may_call" (dict "fn" "ledger_topup_audit(text)") }}
