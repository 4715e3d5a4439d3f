-- The metered lifecycle's last transition, after lifecycle.sql, as ledger_settle bills the late
-- result of a refunded job (ledger_recover): the refund taken back (refunded -> recovered, the
-- awaiting-reclaim sum less the hold, no balance check) and, in the same statement, the job
-- settled (units_used capped at the held units, is_settled) with the unused part of the hold,
-- (held − used) × unit price, given back in a release row when it is above zero.
-- ledger_settle first tries a running job's delivery, which this lifecycle never takes, so the
-- statement is only the refunded job's path. Its guard is the first CTE: the reclaim's (refunded,
-- not reclaimed) and the settlement's (not settled) in one UPDATE of the job. The account row is
-- updated once for both movements, so the reclaim row's balance_after is the balance before the
-- release; the rows are inserted in that order, as the audit's replay by row ID expects.
--
-- The blocks, as the functions move them (the locks as lifecycle.sql says): the reclaim draws the
-- hold again as reclaim.sql does (its blocks in today's order of spending, then the debt for what
-- they cannot cover, which the benchmark's accounts never reach); the release gives the unused
-- part back to what the reclaim drew, the last drawn first (the debt first of all), as
-- block_return does. Both happen in this statement, so the release's share of each draw is
-- computed from the draw itself, not read back from its moves, and each block is updated once, to
-- what the two leave it (from the locked read, as draw.sql says).
--
-- Variable: held (-D, the metered kind's maximum of units, which every job holds). The work used
-- n mod held units, as the Go side reports: each job has its own usage, and the release is never 0.
\set used :n % :held
WITH j AS (
    UPDATE jobs SET state = 'recovered', is_reclaimed = true, reclaimed_at = now(),
                    is_settled = true, settled_at = now(), units_used = least(:used::bigint, held_units),
                    updated_at = now()
    WHERE id = :accounts_prefix::text || :acct::text || '/' || :run::text || '-' || :client_id::text || '-' || :n::text
      AND state = 'refunded' AND is_refunded AND NOT is_reclaimed AND NOT is_settled
    RETURNING id, account_id, cost, (held_units - units_used) * unit_price AS released
), a AS (
    UPDATE accounts SET balance = accounts.balance - j.cost + j.released,
                        awaiting_reclaim = accounts.awaiting_reclaim - j.cost, updated_at = now()
    FROM j WHERE accounts.id = j.account_id
    RETURNING accounts.id, accounts.balance, j.id AS job_id, j.cost, j.released
), entries AS (
    INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
    SELECT a.id, a.job_id, r.kind, r.amount, r.balance_after
    FROM a, LATERAL (VALUES (1, 'reclaim', -a.cost, a.balance - a.released),
                            (2, 'release', a.released, a.balance)) AS r (ord, kind, amount, balance_after)
    WHERE r.kind = 'reclaim' OR a.released > 0
    ORDER BY r.ord
    RETURNING id, account_id, kind, amount
), e AS (
    SELECT id, account_id, -amount AS cost FROM entries WHERE kind = 'reclaim'
), freed AS (
    SELECT id, amount AS released FROM entries WHERE kind = 'release'
), {{draw.sql}}, drawn AS (
    SELECT block_id, remaining, take, ord, sum(take) OVER (ORDER BY ord DESC) - take AS drawn_after
    FROM (SELECT id AS block_id, remaining, take, ord FROM draw
          UNION ALL
          SELECT NULL, NULL, e.cost - (SELECT coalesce(sum(take), 0) FROM draw), 9223372036854775807 FROM e) d
    WHERE take > 0
), back AS (
    SELECT d.block_id, least(d.take, rl.released - d.drawn_after) AS give, d.ord
    FROM drawn d, freed rl WHERE d.drawn_after < rl.released
), blocks AS (
    UPDATE credit_blocks b SET remaining = d.remaining - d.take + coalesce(bk.give, 0)
    FROM drawn d LEFT JOIN back bk ON bk.ord = d.ord
    WHERE b.id = d.block_id
)
INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
SELECT m.account_id, m.entry_id, m.block_id, m.amount
FROM (SELECT e.account_id, e.id AS entry_id, d.block_id, -d.take AS amount, 1 AS step, d.ord AS seq FROM e, drawn d
      UNION ALL
      SELECT e.account_id, rl.id, bk.block_id, bk.give, 2, -bk.ord FROM e, freed rl, back bk) m
ORDER BY m.step, m.seq;
