-- The opening of a job's ledger lifecycle in raw SQL, for pgbench: charge, refund, duplicate
-- refund. Run appends one last transition to make each lifecycle's script: reclaim.sql (the
-- fixed-price lifecycle) or settle.sql (the metered one), so that the two share these statements
-- word for word. Each transition is ONE autocommit statement (one round trip), written against the
-- same tables, guards and constraints as the ledger functions in ../../ledgerdb/code/ (the exposure
-- bound of the charge and the awaiting-reclaim sum of the refund and reclaim included). It is the
-- yardstick the Go API is measured against, so it is kept as lean as it can be while computing the
-- same money and writing the same durable facts: what webhook events are derived from later is
-- written here as the ledger functions write it — each ledger row's transaction ID, by the column's
-- default (ledger_entries.xid), and a rejected job's outcome_xid — and nothing more, as there.
--
-- Writable-CTE rule: every CTE of a statement runs to completion whatever the later ones find, so
-- each statement takes its guard in its FIRST CTE and every later write hangs off that CTE's rows.
-- A guard in the last CTE would not undo an account debit made by an earlier one.
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
-- then debit only when the balance covers the cost; the job becomes running with a charge row, or
-- rejected with none when the account cannot pay.
WITH j AS (
    SELECT id, account_id, cost FROM jobs
    WHERE id = :accounts_prefix::text || :acct::text || '/' || :run::text || '-' || :client_id::text || '-' || :n::text
      AND state = 'submitting' AND NOT is_charged
    FOR UPDATE
), a AS (
    UPDATE accounts SET balance = accounts.balance - j.cost, updated_at = now()
    FROM j WHERE accounts.id = j.account_id AND accounts.balance >= j.cost
      AND accounts.balance - j.cost - accounts.awaiting_reclaim >= -1000000000000000000
    RETURNING accounts.id, accounts.balance
), charged AS (
    UPDATE jobs SET state = 'running', is_charged = true, charged_at = now(), updated_at = now()
    FROM j, a WHERE jobs.id = j.id
    RETURNING jobs.id, jobs.cost, a.id AS account_id, a.balance
), rejected AS (
    UPDATE jobs SET state = 'rejected', reject_reason = 'insufficient_credits', updated_at = now(),
                    outcome_xid = pg_current_xact_id()
    FROM j WHERE jobs.id = j.id AND NOT EXISTS (SELECT FROM a)
)
INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
SELECT account_id, id, 'charge', -cost, balance FROM charged;

-- refund: the guarded job update is the first CTE; the credit and the row follow only its match.
WITH j AS (
    UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), updated_at = now(),
                    refund_reason_code = 'gpu_failed', refund_reason = 'bench: work failed', attempts = greatest(attempts, 3)
    WHERE id = :accounts_prefix::text || :acct::text || '/' || :run::text || '-' || :client_id::text || '-' || :n::text
      AND state = 'running' AND is_charged AND NOT is_refunded
    RETURNING id, account_id, cost
), a AS (
    UPDATE accounts SET balance = accounts.balance + j.cost, awaiting_reclaim = accounts.awaiting_reclaim + j.cost,
                        updated_at = now()
    FROM j WHERE accounts.id = j.account_id
    RETURNING accounts.id, accounts.balance, j.id AS job_id, j.cost
)
INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
SELECT id, job_id, 'refund', cost, balance FROM a;

-- duplicate refund: the same statement again; its guard matches nothing, so nothing is written.
WITH j AS (
    UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), updated_at = now(),
                    refund_reason_code = 'gpu_failed', refund_reason = 'bench: work failed', attempts = greatest(attempts, 3)
    WHERE id = :accounts_prefix::text || :acct::text || '/' || :run::text || '-' || :client_id::text || '-' || :n::text
      AND state = 'running' AND is_charged AND NOT is_refunded
    RETURNING id, account_id, cost
), a AS (
    UPDATE accounts SET balance = accounts.balance + j.cost, awaiting_reclaim = accounts.awaiting_reclaim + j.cost,
                        updated_at = now()
    FROM j WHERE accounts.id = j.account_id
    RETURNING accounts.id, accounts.balance, j.id AS job_id, j.cost
)
INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
SELECT id, job_id, 'refund', cost, balance FROM a;
