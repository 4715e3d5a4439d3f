-- Refund reasons as codes.
--
-- What a customer reads about a refunded job comes from a fixed vocabulary of reason codes, each
-- with a fixed text (ledgerdb.Reason; docs/design.md, "What a customer reads"), never from the
-- words of a GPU service, a workflow's failure or an operator: those may name internal hosts or
-- carry a password. The code is kept in its own column, constrained to the vocabulary; the words,
-- scrubbed of credentials, stay in refund_reason as the operator's detail.
ALTER TABLE jobs ADD COLUMN refund_reason_code text;

-- Jobs refunded before the codes get one inferred from their words, conservatively: the words
-- jobbill itself wrote ("timed out after 3 attempts", "failed for good …", "stopped by an operator:
-- terminated", "the job's workflow failed") say which; anything else is 'unknown', whose text
-- claims no cause.
UPDATE jobs SET refund_reason_code = CASE
        WHEN refund_reason LIKE 'timed out%' THEN 'timed_out'
        WHEN refund_reason LIKE 'failed%' THEN 'gpu_failed'
        WHEN refund_reason LIKE 'stopped by an operator%' THEN 'stopped_by_operator'
        WHEN refund_reason LIKE 'the job''s workflow%' THEN 'interrupted'
        ELSE 'unknown'
    END
WHERE is_refunded;

-- Every refund records a code, and only a refund does (a recovered job keeps its refund's).
ALTER TABLE jobs
    ADD CONSTRAINT jobs_refund_reason_code_known CHECK (refund_reason_code IN
        ('timed_out', 'gpu_failed', 'invalid_result', 'stopped_by_operator', 'interrupted', 'unknown')),
    ADD CONSTRAINT jobs_refund_reason_recorded CHECK ((refund_reason_code IS NOT NULL) = is_refunded);
