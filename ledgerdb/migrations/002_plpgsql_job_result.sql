-- ledger_job_result_of was a LANGUAGE sql function. Called from PL/pgSQL it is not inlined, and
-- PostgreSQL 15 keeps no plan for it across transactions, so every ledger call re-planned it:
-- measured under pgbench, the four lifecycle functions ran at about half the speed of the same
-- transitions written as single statements. In PL/pgSQL the row is built by the plan cache's
-- simple-expression path instead (BENCHMARKS.md has the before and after).
CREATE OR REPLACE FUNCTION ledger_job_result_of(p_outcome text, p_entry_id bigint, p_balance_after bigint, j jobs)
RETURNS ledger_job_result
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN ROW(p_outcome, p_entry_id, p_balance_after, j.id, j.account_id, j.cost, j.state,
               j.state_before_delete, j.is_charged, j.is_refunded, j.is_reclaimed, j.attempts,
               j.reject_reason, j.refund_reason, j.created_at, j.updated_at, j.charged_at,
               j.delivered_at, j.refunded_at, j.reclaimed_at, j.deleted_at)::ledger_job_result;
END
$$;

---- create above / drop below ----

CREATE OR REPLACE FUNCTION ledger_job_result_of(p_outcome text, p_entry_id bigint, p_balance_after bigint, j jobs)
RETURNS ledger_job_result
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_outcome, p_entry_id, p_balance_after, j.id, j.account_id, j.cost, j.state,
           j.state_before_delete, j.is_charged, j.is_refunded, j.is_reclaimed, j.attempts,
           j.reject_reason, j.refund_reason, j.created_at, j.updated_at, j.charged_at,
           j.delivered_at, j.refunded_at, j.reclaimed_at, j.deleted_at
$$;
