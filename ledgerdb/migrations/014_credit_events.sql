-- Webhook events of credit blocks (docs/design.md, "Webhooks"): credit.granted, derived from a
-- grant row that made a block, and credit.expired, derived from an expire row (the expiry pass's,
-- or one a refund or a release caused by returning credits to a block already past its expiry).
-- Both are the account's events, as balance.low is: no job of their own.
--
-- An expire row is also a debit, which may cross the account's threshold: one row may now make two
-- events (credit.expired and balance.low), so a row's derived event is unique per row and type.

ALTER TABLE webhook_events
    DROP CONSTRAINT webhook_events_type_known,
    ADD CONSTRAINT webhook_events_type_known CHECK (type IN
        ('job.charged', 'job.rejected', 'job.delivered', 'job.refunded', 'job.reclaimed', 'balance.low',
         'credit.granted', 'credit.expired')),
    DROP CONSTRAINT webhook_events_job_by_type,
    ADD CONSTRAINT webhook_events_job_by_type CHECK (
        (type IN ('balance.low', 'credit.granted', 'credit.expired')) = (job_id IS NULL));

DROP INDEX webhook_events_entry;
CREATE UNIQUE INDEX webhook_events_entry_type ON webhook_events (entry_id, type) WHERE entry_id IS NOT NULL;

---- create above / drop below ----

DROP INDEX webhook_events_entry_type;
CREATE UNIQUE INDEX webhook_events_entry ON webhook_events (entry_id) WHERE entry_id IS NOT NULL;
ALTER TABLE webhook_events
    DROP CONSTRAINT webhook_events_job_by_type,
    ADD CONSTRAINT webhook_events_job_by_type CHECK ((type = 'balance.low') = (job_id IS NULL)),
    DROP CONSTRAINT webhook_events_type_known,
    ADD CONSTRAINT webhook_events_type_known CHECK (type IN
        ('job.charged', 'job.rejected', 'job.delivered', 'job.refunded', 'job.reclaimed', 'balance.low'));
