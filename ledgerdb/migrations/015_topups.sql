-- Automatic top-ups: an account's rule says that a debit taking its balance below a threshold asks
-- the product's payment code for credits, by a topup.requested webhook event derived from the
-- debit's row like balance.low (no write on the money path). The payment code answers by posting
-- the paid grant with the event's idempotency key; a grant may be posted pending its payment and
-- confirmed or voided later (credit_blocks.status).
CREATE TABLE topup_rules (
    account_id  text        PRIMARY KEY REFERENCES accounts (id),
    -- A debit that takes the balance from at or above it to below it asks for a top-up.
    threshold   bigint      NOT NULL,
    -- fixed: ask for amount credits; target: ask for what fills the balance up to amount.
    mode        text        NOT NULL,
    amount      bigint      NOT NULL,
    -- At most this many credits asked for in one calendar month (UTC).
    monthly_cap bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT topup_rules_mode_known CHECK (mode IN ('fixed', 'target')),
    CONSTRAINT topup_rules_amount_positive CHECK (amount > 0),
    CONSTRAINT topup_rules_cap_positive CHECK (monthly_cap > 0),
    CONSTRAINT topup_rules_target_above_threshold CHECK (mode <> 'target' OR amount > threshold)
);

-- The request is an account's event, derived from the debit's row as balance.low is.
ALTER TABLE webhook_events
    DROP CONSTRAINT webhook_events_type_known,
    ADD CONSTRAINT webhook_events_type_known CHECK (type IN
        ('job.charged', 'job.rejected', 'job.delivered', 'job.refunded', 'job.reclaimed', 'balance.low',
         'credit.granted', 'credit.expired', 'topup.requested')),
    DROP CONSTRAINT webhook_events_job_by_type,
    ADD CONSTRAINT webhook_events_job_by_type CHECK (
        (type IN ('balance.low', 'credit.granted', 'credit.expired', 'topup.requested')) = (job_id IS NULL));

---- create above / drop below ----

ALTER TABLE webhook_events
    DROP CONSTRAINT webhook_events_job_by_type,
    ADD CONSTRAINT webhook_events_job_by_type CHECK (
        (type IN ('balance.low', 'credit.granted', 'credit.expired')) = (job_id IS NULL)),
    DROP CONSTRAINT webhook_events_type_known,
    ADD CONSTRAINT webhook_events_type_known CHECK (type IN
        ('job.charged', 'job.rejected', 'job.delivered', 'job.refunded', 'job.reclaimed', 'balance.low',
         'credit.granted', 'credit.expired'));
DROP TABLE topup_rules;
