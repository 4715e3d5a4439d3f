-- Credit blocks: a grant creates a block (an amount, a category, a priority, when it becomes
-- spendable and when it expires, what the customer paid per credit), and every row that moves
-- credits records which blocks it moved them from or to (ledger_block_moves), so that each
-- block's remaining credits are derivable from rows alone. The balance stays the sum of the
-- account's rows (the sum-of-rows rule): the blocks say where those credits are.

CREATE TABLE credit_blocks (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id      text        NOT NULL REFERENCES accounts (id),
    -- paid: bought by the customer, at cost_basis per credit; promotional: given (sign-up,
    -- goodwill), spent first by default.
    category        text        NOT NULL,
    -- Lower is spent first, within a category.
    priority        integer     NOT NULL DEFAULT 0,
    -- What the grant put in (0 for an account's opening block).
    amount          bigint      NOT NULL,
    -- The block's credits now: amount plus its moves (the audit checks it). Kept here, like the
    -- account's balance, so that a charge finds the blocks to draw from in one indexed read.
    remaining       bigint      NOT NULL,
    effective_at    timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz,
    -- What the customer paid per credit, in the currency's main unit (paid blocks only).
    cost_basis      numeric(20, 10),
    memo            text,
    -- The grant's key (the account's idempotency key for posts); NULL for an opening block.
    idempotency_key text,
    -- active: spendable from effective_at until expires_at; pending: waits for its payment, no
    -- credits yet; void: its payment failed, it never held credits.
    status          text        NOT NULL DEFAULT 'active',
    -- The account's block made by this migration (or when the account was opened): credits whose
    -- draw predates the blocks return to it.
    is_opening      boolean     NOT NULL DEFAULT false,
    -- Set once, by the expiry that removed what remained when the block expired.
    expired_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT credit_blocks_category_known CHECK (category IN ('paid', 'promotional')),
    CONSTRAINT credit_blocks_status_known CHECK (status IN ('active', 'pending', 'void')),
    CONSTRAINT credit_blocks_amount CHECK (amount > 0 OR (is_opening AND amount >= 0)),
    CONSTRAINT credit_blocks_remaining_non_negative CHECK (remaining >= 0),
    CONSTRAINT credit_blocks_expiry_after_effective CHECK (expires_at IS NULL OR expires_at > effective_at),
    CONSTRAINT credit_blocks_cost_basis CHECK (cost_basis IS NULL OR (category = 'paid' AND cost_basis >= 0)),
    CONSTRAINT credit_blocks_keyed CHECK (is_opening = (idempotency_key IS NULL)),
    CONSTRAINT credit_blocks_one_per_key UNIQUE (account_id, idempotency_key)
);

CREATE UNIQUE INDEX credit_blocks_one_opening ON credit_blocks (account_id) WHERE is_opening;
-- A charge reads the account's blocks that still hold credits.
CREATE INDEX credit_blocks_holding ON credit_blocks (account_id) WHERE remaining > 0;
-- The expiry pass reads the blocks whose time has come.
CREATE INDEX credit_blocks_to_expire ON credit_blocks (expires_at) WHERE expired_at IS NULL AND expires_at IS NOT NULL;

-- Which blocks a ledger row moved credits from (amount < 0) or to (amount > 0). block_id NULL is
-- the account's debt (the debt rule): a reclaim that finds no credits draws on it, and the next
-- grant pays it first. A row's moves add up to its amount; an opening block's first move has no
-- row (entry_id NULL): the balance it held when the blocks began.
CREATE TABLE ledger_block_moves (
    id         bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id text    NOT NULL REFERENCES accounts (id),
    entry_id   bigint  REFERENCES ledger_entries (id),
    block_id   bigint  REFERENCES credit_blocks (id),
    amount     bigint  NOT NULL,
    CONSTRAINT ledger_block_moves_amount_non_zero CHECK (amount <> 0),
    CONSTRAINT ledger_block_moves_opening CHECK (entry_id IS NOT NULL OR amount > 0 OR block_id IS NULL)
);

CREATE INDEX ledger_block_moves_entry ON ledger_block_moves (entry_id);
CREATE INDEX ledger_block_moves_block ON ledger_block_moves (block_id);
CREATE INDEX ledger_block_moves_debt ON ledger_block_moves (account_id) WHERE block_id IS NULL;

-- An expiry removes credits from one block: its own row kind, with the block it expired. One that
-- credits returned to an already-expired block caused (a refund or a release) names that row.
ALTER TABLE ledger_entries
    ADD COLUMN block_id  bigint REFERENCES credit_blocks (id),
    ADD COLUMN caused_by bigint REFERENCES ledger_entries (id),
    DROP CONSTRAINT ledger_entries_kind_known,
    ADD CONSTRAINT ledger_entries_kind_known CHECK (kind IN ('grant', 'charge', 'refund', 'reclaim', 'release', 'adjustment', 'expire')),
    DROP CONSTRAINT ledger_entries_amount_sign,
    ADD CONSTRAINT ledger_entries_amount_sign CHECK (CASE kind
        WHEN 'grant'      THEN amount > 0
        WHEN 'charge'     THEN amount < 0
        WHEN 'refund'     THEN amount > 0
        WHEN 'reclaim'    THEN amount < 0
        WHEN 'release'    THEN amount > 0
        WHEN 'adjustment' THEN amount <> 0
        WHEN 'expire'     THEN amount < 0
    END),
    -- An expiry names its block, a grant (since the blocks began) the block it made; no other row
    -- names one.
    ADD CONSTRAINT ledger_entries_expire_block CHECK (CASE kind
        WHEN 'expire' THEN block_id IS NOT NULL
        WHEN 'grant'  THEN true
        ELSE block_id IS NULL
    END),
    ADD CONSTRAINT ledger_entries_caused_by_expire CHECK (caused_by IS NULL OR kind = 'expire');

-- An expiry of what remained in a block happens once; one caused by a return, once per return and
-- block.
CREATE UNIQUE INDEX ledger_entries_one_expiry ON ledger_entries (block_id) WHERE kind = 'expire' AND caused_by IS NULL;
CREATE UNIQUE INDEX ledger_entries_one_return_expiry ON ledger_entries (caused_by, block_id) WHERE kind = 'expire';

-- Every account opens with one paid, non-expiring block holding its balance today (its credits
-- came from grants that never expired); a negative balance is a debt.
INSERT INTO credit_blocks (account_id, category, amount, remaining, effective_at, is_opening, memo, created_at)
SELECT a.id, 'paid', greatest(a.balance, 0), greatest(a.balance, 0), a.created_at, true,
       'credits held when credit blocks began', now()
FROM accounts a;
INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
SELECT a.id, NULL, CASE WHEN a.balance > 0 THEN b.id END, a.balance
FROM accounts a JOIN credit_blocks b ON b.account_id = a.id AND b.is_opening
WHERE a.balance <> 0;

---- create above / drop below ----

DROP INDEX ledger_entries_one_return_expiry;
DROP INDEX ledger_entries_one_expiry;
ALTER TABLE ledger_entries
    DROP CONSTRAINT ledger_entries_caused_by_expire,
    DROP CONSTRAINT ledger_entries_expire_block,
    DROP CONSTRAINT ledger_entries_amount_sign,
    ADD CONSTRAINT ledger_entries_amount_sign CHECK (CASE kind
        WHEN 'grant'      THEN amount > 0
        WHEN 'charge'     THEN amount < 0
        WHEN 'refund'     THEN amount > 0
        WHEN 'reclaim'    THEN amount < 0
        WHEN 'release'    THEN amount > 0
        WHEN 'adjustment' THEN amount <> 0
    END),
    DROP CONSTRAINT ledger_entries_kind_known,
    ADD CONSTRAINT ledger_entries_kind_known CHECK (kind IN ('grant', 'charge', 'refund', 'reclaim', 'release', 'adjustment')),
    DROP COLUMN caused_by,
    DROP COLUMN block_id;
DROP TABLE ledger_block_moves;
DROP TABLE credit_blocks;
