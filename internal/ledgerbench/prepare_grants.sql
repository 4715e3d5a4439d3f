-- The opening grants of the prepared accounts, written as the ledger functions would have written
-- them: every grant ($2..$5: key, category, amount, expiry in seconds, 0 for none) to every account
-- ($1), each a block, a grant row whose balance_after runs on per account, and the row's move into
-- its block.
WITH g AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::float8[]) WITH ORDINALITY AS g (key, category, amount, expires_in, ord)
), blk AS (
    INSERT INTO credit_blocks (account_id, category, amount, remaining, expires_at, memo, idempotency_key)
    SELECT a, g.category, g.amount, g.amount,
           CASE WHEN g.expires_in > 0 THEN now() + g.expires_in * interval '1 second' END, 'ledgerbench opening grant', g.key
    FROM unnest($1::text[]) a, g ORDER BY a, g.ord
    RETURNING id, account_id, amount, memo, idempotency_key
), e AS (
    INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, memo, block_id)
    SELECT account_id, 'grant', amount, sum(amount) OVER (PARTITION BY account_id ORDER BY id), idempotency_key, memo, id
    FROM blk ORDER BY account_id, id
    RETURNING id, account_id, amount, block_id
)
INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
SELECT account_id, id, block_id, amount FROM e ORDER BY id
