-- Builds a ledger_job_result. PL/pgSQL rather than SQL: called from PL/pgSQL, a SQL function is
-- not inlined and PostgreSQL 15 keeps no plan for it across transactions, so every ledger call
-- would plan it again (measured under pgbench: the lifecycle ran at about half speed); in PL/pgSQL
-- the row is built on the plan cache's simple-expression path.
CREATE FUNCTION ledger_job_result_of(p_outcome text, p_entry_id bigint, p_balance_after bigint, j jobs)
RETURNS ledger_job_result
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN ROW(p_outcome, p_entry_id, p_balance_after, j)::ledger_job_result;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_job_result_of(text, bigint, bigint, jobs)") }}
