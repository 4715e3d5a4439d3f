-- The audit's checks of an account's credit blocks against its rows (ledgerdb.Store.Audit, which
-- words each finding): one row per finding, the rule it breaks first, in the order of the rules
-- below, then by the IDs it names. No row: the blocks keep every rule. It reads in its caller's
-- snapshot (STABLE: the audit's repeatable-read transaction, whose own writes it sees) and runs as
-- its caller, who may read every table and write none.
--
--   rule              a, b, c
--   block_moves       block, what it holds, what its moves add up to: each block holds what its
--                     moves add up to, never less than nothing.
--   row_moves         row, its amount, what its block moves add up to: each row written since
--                     the blocks began moved its whole amount across blocks (and the debt).
--   spent_outside     block, row, the row's move: no block was spent before its start or after
--                     its expiry (but by its own grant paying the debt, by an expiry, and before
--                     its start by a draw the debt would otherwise take — a reclaim, a negative
--                     adjustment — or a payment of the debt).
--   expired_early     block, expire row, its amount: none expired before its time (but for the
--                     credits a return brought back to a block the pass had expired).
--   expired_holds     block, what it holds, 0: one that expired holds nothing.
--   held_while_debt   block, what it holds, the debt: while the account has a debt, none of its
--                     blocks that has not ended holds credits (a block ends when it is void,
--                     marked expired or past its expiry): a debt is paid by the first credits
--                     that reach the account.
CREATE FUNCTION ledger_audit_blocks(p_account_id text)
RETURNS TABLE (rule text, a bigint, b bigint, c bigint)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT 'block_moves', bl.id, bl.remaining, coalesce(sum(m.amount), 0)::bigint FROM credit_blocks bl
    LEFT JOIN ledger_block_moves m ON m.block_id = bl.id
    WHERE bl.account_id = p_account_id GROUP BY bl.id HAVING bl.remaining <> coalesce(sum(m.amount), 0) OR bl.remaining < 0
    ORDER BY bl.id;

    RETURN QUERY
    SELECT 'row_moves', e.id, e.amount, coalesce(sum(m.amount), 0)::bigint FROM ledger_entries e
    LEFT JOIN ledger_block_moves m ON m.entry_id = e.id
    WHERE e.account_id = p_account_id
      AND e.created_at >= (SELECT min(o.created_at) FROM credit_blocks o WHERE o.account_id = p_account_id AND o.is_opening)
    GROUP BY e.id HAVING e.amount <> coalesce(sum(m.amount), 0)
    ORDER BY e.id;

    -- Through the account's rows, whose moves are found by their row: the moves table has no
    -- index by account but the debt's, and scanning it whole for every account made an audit's
    -- cost grow with the whole ledger.
    RETURN QUERY
    SELECT 'spent_outside', m.block_id, e.id, m.amount FROM ledger_entries e
    JOIN ledger_block_moves m ON m.entry_id = e.id JOIN credit_blocks bl ON bl.id = m.block_id
    WHERE e.account_id = p_account_id AND m.amount < 0 AND e.kind <> 'expire'
      -- A grant pays the debt from its own block at once, whatever the block's start.
      AND NOT (e.kind = 'grant' AND e.block_id = m.block_id)
      AND ((e.created_at < bl.effective_at
            -- The debt is owed now: a draw the debt would otherwise take (a reclaim, a negative
            -- adjustment) takes from a block not started yet, and so may a payment of the debt
            -- (a row that moves credits onto it). A charge never.
            AND e.kind NOT IN ('reclaim', 'adjustment')
            AND NOT EXISTS (SELECT 1 FROM ledger_block_moves d
                            WHERE d.entry_id = e.id AND d.block_id IS NULL AND d.amount > 0))
           OR e.created_at >= bl.expires_at)
    ORDER BY m.block_id, e.id;

    RETURN QUERY
    SELECT 'expired_early', bl.id, e.id, e.amount FROM ledger_entries e JOIN credit_blocks bl ON bl.id = e.block_id
    WHERE e.account_id = p_account_id AND e.kind = 'expire' AND (bl.expires_at IS NULL OR e.created_at < bl.expires_at)
      -- A return's credits expire at once in a block the pass has expired, even when the
      -- return's transaction began before the block's time.
      AND NOT (e.caused_by IS NOT NULL AND bl.expired_at IS NOT NULL)
    ORDER BY bl.id, e.id;

    RETURN QUERY
    SELECT 'expired_holds', bl.id, bl.remaining, 0::bigint FROM credit_blocks bl
    WHERE bl.account_id = p_account_id AND bl.expired_at IS NOT NULL AND bl.remaining <> 0
    ORDER BY bl.id;

    RETURN QUERY
    SELECT 'held_while_debt', bl.id, bl.remaining, d.debt FROM credit_blocks bl,
        (SELECT coalesce(-sum(dm.amount), 0)::bigint AS debt FROM ledger_block_moves dm
         WHERE dm.account_id = p_account_id AND dm.block_id IS NULL) d
    WHERE bl.account_id = p_account_id AND d.debt > 0 AND bl.remaining > 0 AND bl.status <> 'void'
      AND bl.expired_at IS NULL AND (bl.expires_at IS NULL OR bl.expires_at > now())
    ORDER BY bl.id;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_audit_blocks(text)") }}
