-- Signed webhooks from an outbox (docs/design.md, "Webhooks").
--
-- Every money transition of a job, and a balance crossing its account's low-balance threshold
-- downwards, writes one event row in the same transaction as its ledger row (ledger_emit_event,
-- called by the guarded money functions), so an event exists exactly when its transition
-- committed. The same transaction queues the event for each enabled endpoint of the account
-- (webhook_deliveries); the delivery worker (package webhooks) claims due deliveries, sends them
-- signed, and records each attempt in webhook_attempts.
--
-- The service's role reads these tables like every other (the baseline's default privileges) and
-- changes them only through the functions of ledgerdb/code: endpoints and thresholds through
-- ledger_webhook_* management functions, the delivery bookkeeping through ledger_webhook_claim
-- and ledger_webhook_record_attempt. Events are append-only.

-- A customer's receiver: where an account's events are sent, signed with the endpoint's secret.
CREATE TABLE webhook_endpoints (
    -- The public name of the endpoint: "we_" and random base62.
    id          text        PRIMARY KEY,
    account_id  text        NOT NULL REFERENCES accounts (id),
    -- An https URL (the API and the worker refuse loopback and private addresses unless
    -- webhooks.allow_private_urls is set).
    url         text        NOT NULL,
    -- The signing secret, "whsec_" and base64 of 32 random bytes. The delivery worker must sign
    -- with it, so it is kept as it is; the API shows it once, when it is made (or rotated).
    secret      text        NOT NULL,
    description text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    rotated_at  timestamptz,
    -- Set once, when the endpoint is deleted: it receives nothing more and its row stays, so
    -- that its delivery log keeps naming it.
    disabled_at timestamptz,
    CONSTRAINT webhook_endpoints_id_format CHECK (id ~ '^we_[0-9A-Za-z]{16,64}$'),
    CONSTRAINT webhook_endpoints_url_https CHECK (url ~ '^https?://' AND octet_length(url) <= 2048),
    CONSTRAINT webhook_endpoints_secret_format CHECK (secret ~ '^whsec_[A-Za-z0-9+/]{40,88}={0,2}$'),
    CONSTRAINT webhook_endpoints_description_length CHECK (char_length(description) <= 200)
);

CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id) WHERE disabled_at IS NULL;

-- What happened, once per transition, in the order of a global sequence. Never changed.
CREATE TABLE webhook_events (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The webhook-id every delivery of the event carries, so a receiver recognises duplicates.
    id         text        NOT NULL UNIQUE,
    account_id text        NOT NULL REFERENCES accounts (id),
    -- The job's key (<account>/<job>) for a job's transition; NULL for balance.low.
    job_id     text        REFERENCES jobs (id),
    type       text        NOT NULL,
    -- The job's money figures, or the balance and threshold: never a secret, never a detail.
    payload    jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_events_id_format CHECK (id ~ '^msg_[0-9a-f]{32}$'),
    CONSTRAINT webhook_events_type_known CHECK (type IN
        ('job.charged', 'job.rejected', 'job.delivered', 'job.refunded', 'job.reclaimed', 'balance.low')),
    CONSTRAINT webhook_events_job_by_type CHECK ((type = 'balance.low') = (job_id IS NULL)),
    CONSTRAINT webhook_events_job_of_account CHECK (job_id IS NULL OR starts_with(job_id, account_id || '/'))
);

CREATE INDEX webhook_events_account_seq ON webhook_events (account_id, seq);
CREATE INDEX webhook_events_job ON webhook_events (job_id, seq) WHERE job_id IS NOT NULL;

-- Where each event stands at each endpoint it is sent to: pending (due at next_attempt_at),
-- delivered, failed (given up after webhooks.max_age) or cancelled (its endpoint was deleted). A claim leases a pending row to one
-- worker until leased_until, so that several workers never send it at once.
CREATE TABLE webhook_deliveries (
    endpoint_id     text        NOT NULL REFERENCES webhook_endpoints (id),
    event_seq       bigint      NOT NULL REFERENCES webhook_events (seq),
    -- The event's job, kept here so that a job's later event can wait for its earlier one.
    job_id          text,
    status          text        NOT NULL DEFAULT 'pending',
    attempts        integer     NOT NULL DEFAULT 0,
    -- When this round of delivery began (the event, or its replay): max_age counts from here, or
    -- from when the job's earlier event at the endpoint finished, if later (ledger_webhook_record_attempt).
    queued_at       timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    leased_until    timestamptz,
    lease_token     uuid,
    last_attempt_at timestamptz,
    finished_at     timestamptz,
    PRIMARY KEY (endpoint_id, event_seq),
    CONSTRAINT webhook_deliveries_status_known CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
    CONSTRAINT webhook_deliveries_finished CHECK ((status = 'pending') = (finished_at IS NULL))
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_job_pending ON webhook_deliveries (endpoint_id, job_id, event_seq)
    WHERE status = 'pending' AND job_id IS NOT NULL;

-- The delivery log: one row per attempt, what the receiver answered (or why it could not), and
-- when the next attempt is due (NULL: delivered or given up).
CREATE TABLE webhook_attempts (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id     text        NOT NULL REFERENCES webhook_endpoints (id),
    event_seq       bigint      NOT NULL REFERENCES webhook_events (seq),
    attempt         integer     NOT NULL,
    attempted_at    timestamptz NOT NULL DEFAULT now(),
    http_status     integer,
    error           text,
    duration_ms     integer     NOT NULL,
    outcome         text        NOT NULL,
    next_attempt_at timestamptz,
    CONSTRAINT webhook_attempts_outcome_known CHECK (outcome IN ('delivered', 'retry', 'failed')),
    CONSTRAINT webhook_attempts_error_length CHECK (error IS NULL OR char_length(error) <= 500)
);

CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, id);

-- An account's low-balance threshold: a debit that takes the balance from at or above it to
-- below it writes a balance.low event. No row: no threshold.
CREATE TABLE webhook_low_balance (
    account_id text        PRIMARY KEY REFERENCES accounts (id),
    threshold  bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE webhook_low_balance;
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_events;
DROP TABLE webhook_endpoints;
