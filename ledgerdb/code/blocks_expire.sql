-- Expires blocks whose time has come, the soonest first, at most p_limit of them: what remains of
-- each is removed by one expire row (the block's only expiry of its own: a unique index holds it
-- to that), and the block is marked expired. A block that holds nothing when it expires is marked
-- with no row. Each block is expired under its account's lock, account first as every writer of
-- blocks takes it, so that a charge or a return never interleaves with its expiry. Answers the
-- rows written. The expiry pass (a Temporal Schedule) calls it until it answers fewer than
-- p_limit blocks.
CREATE FUNCTION ledger_expire_blocks(p_limit integer)
RETURNS TABLE (account_id text, block_id bigint, entry_id bigint, amount bigint, balance_after bigint)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    due         record;
    blk         credit_blocks;
    new_balance bigint;
    expiry      bigint;
BEGIN
    FOR due IN
        SELECT b.id, b.account_id FROM credit_blocks b
        WHERE b.expired_at IS NULL AND b.expires_at IS NOT NULL AND b.expires_at <= now() AND b.status = 'active'
        ORDER BY b.expires_at, b.id
        LIMIT p_limit
    LOOP
        PERFORM 1 FROM accounts a WHERE a.id = due.account_id FOR UPDATE;
        SELECT * INTO blk FROM credit_blocks b WHERE b.id = due.id AND b.expired_at IS NULL FOR UPDATE;
        CONTINUE WHEN NOT FOUND; -- another pass expired it meanwhile
        expiry := NULL;
        IF blk.remaining > 0 THEN
            UPDATE accounts a SET balance = a.balance - blk.remaining, updated_at = now()
            WHERE a.id = blk.account_id
            RETURNING a.balance INTO new_balance;
            INSERT INTO ledger_entries (account_id, kind, amount, balance_after, block_id, memo)
            VALUES (blk.account_id, 'expire', -blk.remaining, new_balance, blk.id,
                    ledger_block_expiry_memo(blk, blk.remaining, NULL))
            RETURNING id INTO expiry;
            PERFORM ledger_block_move(blk.account_id, expiry, blk.id, -blk.remaining);
            account_id := blk.account_id;
            block_id := blk.id;
            entry_id := expiry;
            amount := -blk.remaining;
            balance_after := new_balance;
            RETURN NEXT;
        END IF;
        UPDATE credit_blocks b SET expired_at = now() WHERE b.id = blk.id;
    END LOOP;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_expire_blocks(integer)") }}
