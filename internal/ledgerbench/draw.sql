-- The draw of a raw statement that takes credits from an account's blocks (the charge, the
-- reclaim, the settle's reclaim): Run writes it into each script where the script says
-- draw.sql in double braces, so that the order of spending is written once. It reads a CTE e (account_id, cost:
-- the credits to draw), which hangs off the statement's account update, and makes two: held, the
-- account's blocks in effect, locked FOR UPDATE after the account's row (lifecycle.sql says why
-- all of them, empty ones too), and draw (id, remaining, take, ord), what each block gives in the order of
-- spending of ledger_block_draw (promotional before paid, then lower priority, then sooner expiry,
-- none last, then older): every block all it holds until the cost is covered, a running sum over
-- the ordered blocks saying where it ends. What the blocks cannot cover is left to the statement.
-- A block is then set to remaining - take: the value the locked read returned, which is what the
-- block holds, since the statement holds its lock. An update written relative to the row
-- (remaining = remaining - take) is not: PostgreSQL 15 computes it from the row as the statement's
-- snapshot saw it when a transition committed in between, so it would undo that transition's move.
held AS (
    SELECT b.id, b.remaining, b.category, b.priority, b.expires_at, b.created_at
    FROM credit_blocks b, e
    WHERE b.account_id = e.account_id AND b.status = 'active'
      AND b.effective_at <= now() AND (b.expires_at IS NULL OR b.expires_at > now())
    FOR UPDATE OF b
), draw AS (
    SELECT o.id, o.remaining, least(o.remaining, e.cost - o.before) AS take, o.ord
    FROM e, (SELECT id, remaining, sum(remaining) OVER w - remaining AS before, row_number() OVER w AS ord
             FROM held WHERE remaining > 0
             WINDOW w AS (ORDER BY category = 'paid', priority, expires_at NULLS LAST, created_at, id)) o
    WHERE o.before < e.cost
)
