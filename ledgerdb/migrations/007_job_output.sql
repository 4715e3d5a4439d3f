-- A settled job keeps the output its result settled with: what the customer paid for, readable
-- on the job's answer (GET /v1/jobs/{id}) for as long as the ledger keeps the job — longer than
-- Temporal keeps the workflow's history. Set once, by the settlement (ledger_settle); a later
-- result of another attempt bills nothing and changes nothing (jobs_refuse_rewrite). Jobs settled
-- before this column, or settled without knowing their output (a reclaim by an operator), have
-- none.
ALTER TABLE jobs
    ADD COLUMN output_ref text,
    ADD CONSTRAINT jobs_output_ref_length CHECK (output_ref IS NULL OR octet_length(output_ref) <= 2048),
    ADD CONSTRAINT jobs_output_ref_settled CHECK (output_ref IS NULL OR state IN ('delivered', 'recovered', 'deleted'));
