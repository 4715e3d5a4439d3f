-- The fixed-price lifecycle's last transition, after lifecycle.sql, as ledger_reclaim: the late
-- result takes the refund back. refunded -> recovered, the cost taken again with no balance check
-- (the debt rule), and the job settled at its one unit (a reclaim knows no usage; nothing is
-- released).
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
)
INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
SELECT id, job_id, 'reclaim', -cost, balance FROM a;
