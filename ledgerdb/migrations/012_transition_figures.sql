-- What a job's rejection, refund and delivery said at the moment they happened, kept on the job's
-- row by the UPDATE that records the transition, so that an event derived late from the rows
-- (ledger_webhook_job_events) says what an event written at once would have said: later changes
-- to the row (a delete moves updated_at, a redrive's attempts raise attempts, a later debit moves
-- the account's balance) do not reach it. Fixed once set (jobs_fixed_fields).

-- When the job was rejected; jobs rejected before this migration take updated_at, the best record
-- of it they have.
ALTER TABLE jobs ADD COLUMN rejected_at timestamptz;
UPDATE jobs SET rejected_at = updated_at WHERE reject_reason IS NOT NULL;

-- How many attempts the job's work had had when it was refunded; jobs refunded before this
-- migration take attempts, the best record of it they have.
ALTER TABLE jobs ADD COLUMN attempts_at_refund integer;
UPDATE jobs SET attempts_at_refund = attempts WHERE is_refunded;

-- The account's balance as the delivering transaction read it, for a delivery that writes no
-- release row (one that does has the release's balance_after). NULL for deliveries before this
-- migration: their event is derived from the account's last row by the delivery's time.
ALTER TABLE jobs ADD COLUMN balance_at_delivery bigint;

---- create above / drop below ----

ALTER TABLE jobs DROP COLUMN balance_at_delivery;
ALTER TABLE jobs DROP COLUMN attempts_at_refund;
ALTER TABLE jobs DROP COLUMN rejected_at;
