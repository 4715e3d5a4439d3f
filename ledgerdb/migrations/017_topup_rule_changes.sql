-- The history of every account's automatic top-up rule, so that the audit can tell whether a debit
-- that asked for a top-up was made while a rule stood (docs/design.md, "Automatic top-ups"): only a
-- debit made at or after its rule was made may ask, and a rule removed leaves no row in
-- topup_rules to say when it was made.
--
-- One row per change, append-only (ledgerdb/code/append_only.sql), written by
-- ledger_topup_set_rule in the transaction that makes the change: the rule's terms as set, or all
-- NULL for a removal. A rule stood at a time when the account's last change at or before it set
-- terms. Changing the terms keeps the rule's creation time (topup_rules.created_at); a removal and
-- a new rule start another.
CREATE TABLE topup_rule_changes (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id  text        NOT NULL REFERENCES accounts (id),
    changed_at  timestamptz NOT NULL DEFAULT now(),
    -- NULL, all four: the rule was removed.
    threshold   bigint,
    mode        text,
    amount      bigint,
    monthly_cap bigint,
    CONSTRAINT topup_rule_changes_terms_whole CHECK (
        (threshold IS NULL) = (mode IS NULL) AND (mode IS NULL) = (amount IS NULL) AND (amount IS NULL) = (monthly_cap IS NULL))
);

CREATE INDEX topup_rule_changes_account ON topup_rule_changes (account_id, changed_at);

-- The rules standing now, each from when it was made, with its terms as they stand: what they
-- were before a change is not known, and only when the rule was made matters to the audit. A rule
-- removed before this migration left nothing to carry across.
INSERT INTO topup_rule_changes (account_id, changed_at, threshold, mode, amount, monthly_cap)
SELECT account_id, created_at, threshold, mode, amount, monthly_cap FROM topup_rules ORDER BY created_at;

---- create above / drop below ----

DROP TABLE topup_rule_changes;
