-- The balances of every account of one side and lifecycle (verifyBalances): each account's
-- balance, awaiting-reclaim sum and sum of rows, and the balance its jobs say it should have: its
-- grant less each job's price (fixed) or usage × unit price (metered, the usage read back from the
-- job's ID). $1 the side's account prefix, $2 the grant per account, $3 the unit price, $4 the
-- held units, $5 metered.
SELECT a.id, a.balance, a.awaiting_reclaim,
       (SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e WHERE e.account_id = a.id),
       $2::bigint - (SELECT coalesce(sum(CASE WHEN $5::boolean
                                             THEN (split_part(j.id, '-', -1)::bigint % $4::bigint) * $3::bigint
                                             ELSE $3::bigint * $4::bigint END), 0)
                     FROM jobs j WHERE j.account_id = a.id)
FROM accounts a WHERE starts_with(a.id, $1)
