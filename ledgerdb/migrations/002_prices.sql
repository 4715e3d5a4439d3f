-- Prices set by the server, and usage metered and settled.
--
-- A job names its kind; the price list says what a unit of that kind costs and, for a metered
-- kind, how many units one job may use. The job records the price it was submitted at, and its
-- charge holds unit price × held units. When its result lands with the units the work used, the
-- settlement returns the unused part of the hold in one release row, once. Charge, refund and
-- reclaim still move exactly the held amount, so they stay exact reversing pairs; a settled job's
-- net is −(units used × unit price).

-- The price list: one row per kind and version, append-only (ledgerdb/code/append_only.sql).
-- A new price is a new version; a job keeps the version it was submitted at.
CREATE TABLE prices (
    kind       text        NOT NULL,
    version    integer     NOT NULL,
    -- 'job': one unit per job, a fixed price. 'gpu_second': metered by the second of GPU time.
    unit       text        NOT NULL,
    -- Credits per unit. Credits are integers: docs/design.md ("Prices, holds and settlement") says
    -- what one is worth.
    unit_price bigint      NOT NULL,
    -- The most units one job may use: what its charge holds. Always 1 for 'job'.
    max_units  bigint      NOT NULL,
    memo       text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, version),
    CONSTRAINT prices_kind_format CHECK (kind ~ '^[a-z][a-z0-9._-]{0,63}$'),
    CONSTRAINT prices_version_positive CHECK (version >= 1),
    CONSTRAINT prices_unit_known CHECK (unit IN ('job', 'gpu_second')),
    CONSTRAINT prices_unit_price_positive CHECK (unit_price > 0),
    CONSTRAINT prices_max_units CHECK (max_units >= 1 AND (unit <> 'job' OR max_units = 1)),
    -- A whole hold is at most the largest cost a job may have (ledgerdb.MaxAmount).
    CONSTRAINT prices_hold_bounded CHECK (unit_price::numeric * max_units <= 1000000000000000)
);

-- The price a job was submitted at, copied from its version of the price list so that the job's
-- row alone says what every one of its ledger rows must be. Jobs submitted before the price list
-- (a cost and no kind) leave them NULL and are billed as a fixed cost.
ALTER TABLE jobs
    ADD COLUMN kind          text,
    ADD COLUMN price_version integer,
    ADD COLUMN unit          text,
    ADD COLUMN unit_price    bigint,
    -- The units the charge holds: the kind's max_units, or the smaller maximum the client asked.
    ADD COLUMN held_units    bigint,
    -- The units the work used, capped at held_units; set once, when the job is settled.
    ADD COLUMN units_used    bigint,
    -- The settlement's guard flag: set once, with units_used, by the step that bills the result.
    ADD COLUMN is_settled    boolean NOT NULL DEFAULT false,
    ADD COLUMN settled_at    timestamptz,
    ADD CONSTRAINT jobs_price_recorded CHECK (
        (kind IS NULL AND price_version IS NULL AND unit IS NULL AND unit_price IS NULL AND held_units IS NULL)
        OR (kind IS NOT NULL AND price_version IS NOT NULL AND unit IS NOT NULL AND unit_price IS NOT NULL
            AND held_units >= 1 AND cost = unit_price * held_units)),
    ADD CONSTRAINT jobs_price_exists FOREIGN KEY (kind, price_version) REFERENCES prices (kind, version),
    ADD CONSTRAINT jobs_settlement CHECK (
        (is_settled = (units_used IS NOT NULL)) AND (is_settled = (settled_at IS NOT NULL))
        AND (units_used IS NULL OR (kind IS NOT NULL AND units_used >= 0 AND units_used <= held_units))
        AND (NOT is_settled OR coalesce(state_before_delete, state) IN ('delivered', 'recovered')));

-- A release row gives back the unused part of a settled job's hold: positive, one per job.
ALTER TABLE ledger_entries
    DROP CONSTRAINT ledger_entries_kind_known,
    DROP CONSTRAINT ledger_entries_amount_sign,
    DROP CONSTRAINT ledger_entries_job_kinds,
    ADD CONSTRAINT ledger_entries_kind_known CHECK (kind IN ('grant', 'charge', 'refund', 'reclaim', 'release', 'adjustment')),
    ADD CONSTRAINT ledger_entries_amount_sign CHECK (CASE kind
        WHEN 'grant'      THEN amount > 0
        WHEN 'charge'     THEN amount < 0
        WHEN 'refund'     THEN amount > 0
        WHEN 'reclaim'    THEN amount < 0
        WHEN 'release'    THEN amount > 0
        WHEN 'adjustment' THEN amount <> 0
    END),
    ADD CONSTRAINT ledger_entries_job_kinds CHECK ((kind IN ('charge', 'refund', 'reclaim', 'release')) = (job_id IS NOT NULL));

-- A reported result carries the units its work used (NULL when the runner did not say).
ALTER TABLE result_reports
    ADD COLUMN units_used bigint,
    ADD CONSTRAINT result_reports_units_non_negative CHECK (units_used IS NULL OR units_used >= 0);

-- What ledger_set_price answers: applied (a new version), or already_applied (the latest version
-- already says the same), and the price list's row for the kind as it now stands.
CREATE TYPE ledger_price_result AS (
    outcome text,
    price   prices
);
