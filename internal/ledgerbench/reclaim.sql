-- The fixed-price lifecycle's last transition, after lifecycle.sql, as ledger_reclaim: the late
-- result takes the refund back. refunded -> recovered, the cost taken again with no balance check
-- (the debt rule), and the job settled at its one unit (a reclaim knows no usage; nothing is
-- released). The cost is drawn again as a charge draws it, from the account's spendable blocks
-- in today's order of spending (the locks as lifecycle.sql says); what they cannot cover is drawn
-- on the account's debt (a move with no block, drawn last), as ledger_block_draw does for a
-- reclaim. The benchmark's accounts hold far more than their jobs cost, so its reclaims never
-- reach the debt; the statement still draws on it, so that it computes what the function would.
WITH j AS (
    UPDATE jobs SET state = 'recovered', is_reclaimed = true, reclaimed_at = now(), updated_at = now(),
                    is_settled = true, units_used = held_units, settled_at = now()
    WHERE id = :accounts_prefix::text || :acct::text || '/' || :run::text || '-' || :client_id::text || '-' || :n::text
      AND state = 'refunded' AND is_refunded AND NOT is_reclaimed
    RETURNING id, account_id, cost
), a AS (
    UPDATE accounts SET balance = accounts.balance - j.cost, awaiting_reclaim = accounts.awaiting_reclaim - j.cost,
                        updated_at = now()
    FROM j WHERE accounts.id = j.account_id
    RETURNING accounts.id, accounts.balance, j.id AS job_id, j.cost
), e AS (
    INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
    SELECT id, job_id, 'reclaim', -cost, balance FROM a
    RETURNING id, account_id, -amount AS cost
), {{draw.sql}}, spent AS (
    UPDATE credit_blocks b SET remaining = draw.remaining - draw.take FROM draw WHERE b.id = draw.id
)
INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
SELECT e.account_id, e.id, m.block_id, -m.take
FROM e, (SELECT id AS block_id, take, ord FROM draw
         UNION ALL
         SELECT NULL, e.cost - (SELECT coalesce(sum(take), 0) FROM draw), 9223372036854775807 FROM e) m
WHERE m.take > 0
ORDER BY m.ord;
