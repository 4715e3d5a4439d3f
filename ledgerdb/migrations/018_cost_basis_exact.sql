-- A cost basis is stored as its caller wrote it: numeric(20, 10) rounded anything finer than ten
-- decimals (a cost of 1/3000000 per credit, 1e-11 to nothing), so that the block kept another
-- price than the one paid and the grant's own retry, compared with what was kept, read as a
-- conflict. numeric(38, 18) keeps up to 18 decimals and below 10^20; ledger_post and the Go doors
-- refuse what it cannot keep exactly, naming cost_basis. Widening loses nothing.
ALTER TABLE credit_blocks ALTER COLUMN cost_basis TYPE numeric(38, 18);

---- create above / drop below ----

-- Rounds a cost basis finer than ten decimals, as the column did before.
ALTER TABLE credit_blocks ALTER COLUMN cost_basis TYPE numeric(20, 10);
