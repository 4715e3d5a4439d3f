-- The ledger's totals the whole-system invariant checker (package invariants) compares against the
-- money rules and against Temporal: one row per account in scope (ledger_snapshot_accounts) and
-- one per job (ledger_snapshot_jobs), each beside what its rows say, so that a check of thousands
-- of jobs stays two statements. The checker reads both in one repeatable-read transaction
-- (ledgerdb.Store.LedgerSnapshot), so that the accounts and the jobs agree with each other; these
-- functions read in their caller's snapshot (STABLE), and see what its transaction wrote.
--
-- The scope is an account (p_account_id), a prefix of job IDs (p_job_id_prefix: the jobs whose ID
-- starts with it and, without an account, the accounts that own such a job), both, or neither
-- ('' for none: the whole ledger). Both run as their caller, who may read every table and write
-- none.

-- One row per account in scope, by ID: the stored balance beside the sum of its rows (the
-- sum-of-rows rule), and the running sum of its rows in commit order (ID order) beside each row's
-- balance_after, the same replay the audit does row by row; its stored awaiting-reclaim sum beside
-- the costs of its refunded jobs not yet reclaimed, deleted ones included; what its blocks hold
-- and its debt (the balance is their difference), its blocks that do not hold what their moves
-- add up to, and what its blocks that have not ended hold (a block ends when it is void, marked
-- expired or past its expiry); the revenue audit (ledger_revenue_audit) and the top-up audit
-- (ledger_topup_audit) of the account.
CREATE FUNCTION ledger_snapshot_accounts(p_account_id text, p_job_id_prefix text)
RETURNS TABLE (account_id text, balance bigint, entry_sum bigint, entries bigint, chain_breaks bigint,
               first_chain_break bigint, awaiting_reclaim bigint, refunded_costs bigint, blocks_held bigint,
               debt bigint, blocks_off bigint, unended_held bigint,
               recognised_credits bigint, recognised_amount numeric, delivered_credits bigint,
               delivered_amount numeric, undelivered_jobs text[], topup_problems text[])
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH scoped AS (
        SELECT a.id, a.balance, a.awaiting_reclaim, r.recognised_credits, r.recognised_amount,
               r.delivered_credits, r.delivered_amount, r.undelivered_jobs
        FROM accounts a CROSS JOIN LATERAL ledger_revenue_audit(a.id) r
        WHERE CASE WHEN p_account_id <> '' THEN a.id = p_account_id
                   WHEN p_job_id_prefix <> '' THEN EXISTS (SELECT 1 FROM jobs j WHERE j.account_id = a.id AND starts_with(j.id, a.id || '/' || p_job_id_prefix))
                   ELSE true END
    ), chained AS (
        SELECT e.account_id, e.id, e.amount, e.balance_after,
               sum(e.amount) OVER (PARTITION BY e.account_id ORDER BY e.id) AS running
        FROM ledger_entries e JOIN scoped s ON s.id = e.account_id
    )
    SELECT s.id, s.balance, coalesce(sum(c.amount), 0)::bigint, count(c.id),
           count(c.id) FILTER (WHERE c.balance_after <> c.running),
           coalesce(min(c.id) FILTER (WHERE c.balance_after <> c.running), 0),
           s.awaiting_reclaim,
           (SELECT coalesce(sum(j.cost), 0)::bigint FROM jobs j WHERE j.account_id = s.id AND j.is_refunded AND NOT j.is_reclaimed),
           (SELECT coalesce(sum(b.remaining), 0)::bigint FROM credit_blocks b WHERE b.account_id = s.id),
           (SELECT coalesce(-sum(m.amount), 0)::bigint FROM ledger_block_moves m WHERE m.account_id = s.id AND m.block_id IS NULL),
           (SELECT count(*) FROM credit_blocks b WHERE b.account_id = s.id
               AND b.remaining <> (SELECT coalesce(sum(m.amount), 0) FROM ledger_block_moves m WHERE m.block_id = b.id)),
           (SELECT coalesce(sum(b.remaining), 0)::bigint FROM credit_blocks b WHERE b.account_id = s.id
               AND b.remaining > 0 AND b.status <> 'void' AND b.expired_at IS NULL
               AND (b.expires_at IS NULL OR b.expires_at > now())),
           s.recognised_credits, s.recognised_amount, s.delivered_credits, s.delivered_amount, s.undelivered_jobs,
           (SELECT coalesce(array_agg(t.problem ORDER BY t.event_seq), '{}') FROM ledger_topup_audit(s.id) t)
    FROM scoped s LEFT JOIN chained c ON c.account_id = s.id
    GROUP BY s.id, s.balance, s.awaiting_reclaim, s.recognised_credits, s.recognised_amount, s.delivered_credits,
             s.delivered_amount, s.undelivered_jobs
    ORDER BY s.id;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_snapshot_accounts(text, text)") }}

-- One row per job in scope, by ID: its row beside how many rows of each kind it has (the
-- reversing-pairs rule), their sum (the net-effect rule), and how many are booked on another
-- account than the job's; its alarms ("step: message"); and its recorded results: how many no
-- workflow has taken yet, when the oldest of those was recorded, and when one was last taken.
CREATE FUNCTION ledger_snapshot_jobs(p_account_id text, p_job_id_prefix text)
RETURNS TABLE (job jobs, charges bigint, refunds bigint, reclaims bigint, releases bigint, entry_sum bigint,
               foreign_entries bigint, alarms text[], unapplied_results bigint,
               oldest_unapplied_result timestamptz, last_applied_result timestamptz)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT j,
           count(e.id) FILTER (WHERE e.kind = 'charge'),
           count(e.id) FILTER (WHERE e.kind = 'refund'),
           count(e.id) FILTER (WHERE e.kind = 'reclaim'),
           count(e.id) FILTER (WHERE e.kind = 'release'),
           coalesce(sum(e.amount), 0)::bigint,
           count(e.id) FILTER (WHERE e.account_id <> j.account_id),
           (SELECT coalesce(array_agg(a.step || ': ' || a.message ORDER BY a.id), '{}') FROM ledger_alarms a WHERE a.job_id = j.id),
           (SELECT count(*) FROM result_reports r WHERE r.job_id = j.id AND r.applied_at IS NULL),
           (SELECT min(r.received_at) FROM result_reports r WHERE r.job_id = j.id AND r.applied_at IS NULL),
           (SELECT max(r.applied_at) FROM result_reports r WHERE r.job_id = j.id)
    FROM jobs j LEFT JOIN ledger_entries e ON e.job_id = j.id
    WHERE (p_account_id = '' OR j.account_id = p_account_id)
      AND (p_job_id_prefix = '' OR starts_with(j.id, j.account_id || '/' || p_job_id_prefix))
    GROUP BY j.id
    ORDER BY j.id;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_snapshot_jobs(text, text)") }}
