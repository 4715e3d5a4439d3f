-- The opening of a job's ledger lifecycle in raw SQL, for pgbench: charge, refund, duplicate
-- refund. Run appends one last transition to make each lifecycle's script: reclaim.sql (the
-- fixed-price lifecycle) or settle.sql (the metered one), so that the two share these statements
-- word for word; and it writes draw.sql, the draw from credit blocks the charge and the reclaims
-- share, where a statement names it in double braces. Each transition is ONE autocommit statement (one
-- round trip), written against the same tables, guards and constraints as the ledger functions in
-- ../../ledgerdb/code/ (the exposure bound of the charge, its spendable-credits check and the
-- awaiting-reclaim sum of the refund and reclaim included). It is the yardstick the Go API is
-- measured against, so it is kept as lean as it can be while computing the same money and writing
-- the same durable facts:
--   - the ledger rows, each with its balance_after, and the jobs' flags, times and reasons;
--   - the credit blocks' moves (ledger_block_moves, one per block a row took credits from or gave
--     them back to, in the order the functions write them) and each block's remaining, kept as the
--     functions keep it (block_draw_plan, block_return in blocks_moves.sql);
--   - what webhook events are derived from later, as the ledger functions write it — each ledger
--     row's transaction ID, by the column's default (ledger_entries.xid), and a rejected job's
--     outcome_xid — and nothing more, as there.
-- Credits returned to a block already past its expiry expire at once in the functions (an expire
-- row per block); the benchmark's blocks expire long after any run, so no return here can land in
-- one, and the statements leave that case out.
--
-- Writable-CTE rule: every CTE of a statement runs to completion whatever the later ones find, so
-- each statement takes its guard in its FIRST CTE and every later write hangs off that CTE's rows.
-- A guard in the last CTE would not undo an account debit made by an earlier one.
--
-- Locks and snapshots: every statement locks the job, then the account (a write of its row), then
-- the account's blocks, in that order as the functions do; the blocks' CTEs hang off the account's
-- row, so they run after its lock is held. The statement's snapshot was taken before it waited for
-- that lock, so a block a concurrent transition of the account changed meanwhile would be read as
-- it stood before: the draws lock the account's blocks FOR UPDATE, which reads each one as it now
-- stands, and lock all of its blocks in effect, empty ones too, since a block the snapshot saw
-- empty may have had credits returned since, and set each block from that read (draw.sql says why).
-- The refund gives back with a plain UPDATE relative to the row, which PostgreSQL applies to the
-- block's newest version. (The functions lock the job and its account in a first statement and
-- write in a second, whose snapshot, taken with both locks held, reads the blocks as they stand,
-- so they lock only the blocks that hold credits.)
--
-- Variables: run (-D, the run's job-ID prefix), n (-D n=0, this client's lifecycle counter: pgbench
-- keeps a client's variables across its transactions, so each client walks its own jobs 1..N),
-- client_id (pgbench's own), and accounts_prefix, accounts and stride (-D): the job's account is
-- account number (client_id + n × stride) mod accounts, the one the Go side put the job on (see
-- accountIndex in ledgerbench.go). Job IDs belong to their account, so a job is found by its key,
-- <account>/<job ID>: accounts_prefix || acct || '/' || run || '-' || client_id || '-' || n. Needs
-- -M prepared (or extended): the variables become typed parameters, which is why each one is cast
-- to text and never quoted.
\set n :n + 1
\set acct (:client_id + :n * :stride) % :accounts

-- charge: lock the job under its guard first (job before account, as every ledger function does),
-- then debit only when the balance and the spendable blocks cover the cost; the job becomes
-- running with a charge row, or rejected with none when the account cannot pay. The charge's
-- credits are drawn from the account's spendable blocks in the order of spending (draw.sql), each
-- block updated and a move written for what it gave, in that order.
WITH j AS (
    SELECT id, account_id, cost FROM jobs
    WHERE id = :accounts_prefix::text || :acct::text || '/' || :run::text || '-' || :client_id::text || '-' || :n::text
      AND state = 'submitting' AND NOT is_charged
    FOR UPDATE
), a AS (
    UPDATE accounts SET balance = accounts.balance - j.cost, updated_at = now()
    FROM j WHERE accounts.id = j.account_id AND accounts.balance >= j.cost
      AND accounts.balance - j.cost - accounts.awaiting_reclaim >= -1000000000000000000
      AND (SELECT coalesce(sum(b.remaining), 0) FROM credit_blocks b
           WHERE b.account_id = j.account_id AND b.remaining > 0 AND b.status = 'active'
             AND b.effective_at <= now() AND (b.expires_at IS NULL OR b.expires_at > now())) >= j.cost
    RETURNING accounts.id, accounts.balance
), charged AS (
    UPDATE jobs SET state = 'running', is_charged = true, charged_at = now(), updated_at = now()
    FROM j, a WHERE jobs.id = j.id
    RETURNING jobs.id, jobs.cost, a.id AS account_id, a.balance
), rejected AS (
    UPDATE jobs SET state = 'rejected', reject_reason = 'insufficient_credits', updated_at = now(), rejected_at = now(),
                    outcome_xid = pg_current_xact_id()
    FROM j WHERE jobs.id = j.id AND NOT EXISTS (SELECT FROM a)
), e AS (
    INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
    SELECT account_id, id, 'charge', -cost, balance FROM charged
    RETURNING id, account_id, -amount AS cost
), {{draw.sql}}, spent AS (
    UPDATE credit_blocks b SET remaining = draw.remaining - draw.take FROM draw WHERE b.id = draw.id
)
INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
SELECT e.account_id, e.id, draw.id, -draw.take FROM e, draw ORDER BY draw.ord;

-- refund: the guarded job update is the first CTE; the credit and the row follow only its match.
-- The credits go back to the blocks the charge drew them from, each block what it gave, in the
-- moves' order of block_return in blocks_moves.sql (the last drawn first; a charge never draws
-- on the debt).
WITH j AS (
    UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), updated_at = now(),
                    refund_reason_code = 'gpu_failed', refund_reason = 'bench: work failed', attempts = greatest(attempts, 3),
                    attempts_at_refund = greatest(attempts, 3)
    WHERE id = :accounts_prefix::text || :acct::text || '/' || :run::text || '-' || :client_id::text || '-' || :n::text
      AND state = 'running' AND is_charged AND NOT is_refunded
    RETURNING id, account_id, cost
), a AS (
    UPDATE accounts SET balance = accounts.balance + j.cost, awaiting_reclaim = accounts.awaiting_reclaim + j.cost,
                        updated_at = now()
    FROM j WHERE accounts.id = j.account_id
    RETURNING accounts.id, accounts.balance, j.id AS job_id, j.cost
), e AS (
    INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
    SELECT id, job_id, 'refund', cost, balance FROM a
    RETURNING id, account_id, job_id
), drawn AS (
    SELECT m.block_id, -sum(m.amount) AS amount, max(m.id) AS last_move
    FROM e JOIN ledger_entries c ON c.job_id = e.job_id AND c.kind = 'charge'
    JOIN ledger_block_moves m ON m.entry_id = c.id AND m.amount < 0
    GROUP BY m.block_id
), back AS (
    UPDATE credit_blocks b SET remaining = b.remaining + drawn.amount FROM drawn WHERE b.id = drawn.block_id
)
INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
SELECT e.account_id, e.id, drawn.block_id, drawn.amount FROM e, drawn ORDER BY drawn.last_move DESC;

-- duplicate refund: the same statement again; its guard matches nothing, so nothing is written.
WITH j AS (
    UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), updated_at = now(),
                    refund_reason_code = 'gpu_failed', refund_reason = 'bench: work failed', attempts = greatest(attempts, 3),
                    attempts_at_refund = greatest(attempts, 3)
    WHERE id = :accounts_prefix::text || :acct::text || '/' || :run::text || '-' || :client_id::text || '-' || :n::text
      AND state = 'running' AND is_charged AND NOT is_refunded
    RETURNING id, account_id, cost
), a AS (
    UPDATE accounts SET balance = accounts.balance + j.cost, awaiting_reclaim = accounts.awaiting_reclaim + j.cost,
                        updated_at = now()
    FROM j WHERE accounts.id = j.account_id
    RETURNING accounts.id, accounts.balance, j.id AS job_id, j.cost
), e AS (
    INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
    SELECT id, job_id, 'refund', cost, balance FROM a
    RETURNING id, account_id, job_id
), drawn AS (
    SELECT m.block_id, -sum(m.amount) AS amount, max(m.id) AS last_move
    FROM e JOIN ledger_entries c ON c.job_id = e.job_id AND c.kind = 'charge'
    JOIN ledger_block_moves m ON m.entry_id = c.id AND m.amount < 0
    GROUP BY m.block_id
), back AS (
    UPDATE credit_blocks b SET remaining = b.remaining + drawn.amount FROM drawn WHERE b.id = drawn.block_id
)
INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
SELECT e.account_id, e.id, drawn.block_id, drawn.amount FROM e, drawn ORDER BY drawn.last_move DESC;
