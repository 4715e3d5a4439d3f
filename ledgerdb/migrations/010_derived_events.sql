-- Webhook events derived from the ledger's own rows (docs/design.md, "Webhooks").
--
-- Until now every money transition wrote its event row, looked up the account's endpoints, checked
-- the low-balance threshold and queued its deliveries inside the money transaction. From here on
-- the money transaction writes only what money needs, and the delivery side derives the events
-- afterwards, in batches, only for accounts that have endpoints (ledger_webhook_derive):
--
-- - job.charged, job.refunded and job.reclaimed come from the job's charge, refund and reclaim
--   rows; balance.low from a debit row whose balance_after crosses the account's threshold;
-- - job.rejected and job.delivered, which may write no ledger row (a rejection never does; a
--   delivery writes one only when a release is due), come from the job's row, which the
--   transition writes anyway: its outcome_xid says which transaction gave the job that outcome.
--
-- A derive pass must never skip a row whose transaction commits after a later row was read (ids
-- and transaction IDs are handed out before commit, in another order than commits). So every row
-- carries the ID of the transaction that wrote it (xid, outcome_xid), and the pass reads only
-- transactions older than the oldest one still running (pg_snapshot_xmin): those are over, and no
-- transaction that is not over can ever write a row with such an ID. The cursor,
-- webhook_derive_cursor.horizon, moves to that bound after each pass.
--
-- Data in flight carries across unchanged: the events the old outbox wrote stay in webhook_events
-- (their rows and jobs keep xid and outcome_xid NULL, "written by the old outbox"), and their
-- deliveries, pending or not, stay in webhook_deliveries, where the same workers finish them. The
-- ledger's functions are replaced right after this migration, by the same migrate run; a
-- transition that commits in between may have its event written by the old code and derived
-- again: derived events are unique per job and type, so the job's event is kept once, and a
-- balance.low of that moment is recognised by its account and transaction time
-- (ledger_webhook_materialize).

-- The transaction that wrote the row: what the derive pass orders by. Rows written before this
-- migration keep NULL (their events exist already). Set by the column's default, so no money
-- function spends a statement on it.
ALTER TABLE ledger_entries ADD COLUMN xid xid8;
ALTER TABLE ledger_entries ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX ledger_entries_xid ON ledger_entries (xid) WHERE xid IS NOT NULL;

-- The transaction that rejected the job or delivered it (the two outcomes that may write no
-- ledger row), set by the UPDATE that records the outcome; NULL before it, and for jobs that got
-- their outcome before this migration.
ALTER TABLE jobs ADD COLUMN outcome_xid xid8;
CREATE INDEX jobs_outcome_xid ON jobs (outcome_xid) WHERE outcome_xid IS NOT NULL;

-- Derived events are unique per source: a job's event per job and type (a job passes each
-- transition once), a balance.low per debit row (entry_id, the ledger row's id: no foreign key,
-- so that ledger_entries keeps refusing TRUNCATE by its own trigger). Events of the old outbox keep
-- entry_id NULL.
ALTER TABLE webhook_events ADD COLUMN entry_id bigint;
CREATE UNIQUE INDEX webhook_events_job_type ON webhook_events (job_id, type) WHERE job_id IS NOT NULL;
CREATE UNIQUE INDEX webhook_events_entry ON webhook_events (entry_id) WHERE entry_id IS NOT NULL;

-- How far events have been derived: every transaction below horizon has been read. One row.
CREATE TABLE webhook_derive_cursor (
    id         integer     PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    horizon    xid8        NOT NULL,
    derived_at timestamptz NOT NULL DEFAULT now()
);

-- From the oldest transaction running now: every later row carries a transaction ID at or above it.
INSERT INTO webhook_derive_cursor (horizon) VALUES (pg_snapshot_xmin(pg_current_snapshot()));

---- create above / drop below ----

DROP TABLE webhook_derive_cursor;
DROP INDEX webhook_events_entry;
DROP INDEX webhook_events_job_type;
ALTER TABLE webhook_events DROP COLUMN entry_id;
DROP INDEX jobs_outcome_xid;
ALTER TABLE jobs DROP COLUMN outcome_xid;
DROP INDEX ledger_entries_xid;
ALTER TABLE ledger_entries DROP COLUMN xid;
