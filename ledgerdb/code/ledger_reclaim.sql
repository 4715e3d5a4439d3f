-- Takes the refund back when a refunded job's result landed after all: refunded -> recovered. No
-- balance check: the work was delivered, so the debt stands (the debt rule); the lower exposure
-- bound guarantees the balance still fits. Only the reclaim: ledger_reclaim and ledger_settle
-- settle the job in the same transaction.
-- A tombstone of a refunded job is reclaimed the same way and stays a tombstone (deleted, its
-- state before deletion now recovered): deletion hides a job, it never cancels what the customer
-- owes for work that was delivered. Any other tombstone answers as the state it was deleted from
-- (ledger_job_unmatched), so that a retried step gets the answer its first call lost.
CREATE FUNCTION ledger_reclaim_refund(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    r ledger_job_result;
BEGIN
    WITH recovered AS (
        UPDATE jobs SET state = CASE WHEN state = 'deleted' THEN 'deleted' ELSE 'recovered' END,
                        state_before_delete = CASE WHEN state = 'deleted' THEN 'recovered' END,
                        is_reclaimed = true, reclaimed_at = now(), updated_at = now()
        WHERE id = p_job_id AND coalesce(state_before_delete, state) = 'refunded' AND is_refunded AND NOT is_reclaimed
        RETURNING jobs AS job
    ), debit AS (
        UPDATE accounts a SET balance = a.balance - (j.job).cost, awaiting_reclaim = a.awaiting_reclaim - (j.job).cost,
                              updated_at = now()
        FROM recovered j
        WHERE a.id = (j.job).account_id
        RETURNING a.balance
    ), entry AS (
        INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
        SELECT (j.job).account_id, (j.job).id, 'reclaim', -(j.job).cost, d.balance FROM recovered j, debit d
        RETURNING id, balance_after
    )
    SELECT 'applied', e.id, e.balance_after, j.job INTO r FROM recovered j, entry e;
    IF FOUND THEN
        -- Drawn again in today's order of spending; what the blocks cannot cover is a debt.
        PERFORM ledger_block_draw((r.job).account_id, r.entry_id, (r.job).cost, true);
        RETURN r;
    END IF;
    RETURN ledger_job_unmatched(p_job_id, ARRAY['recovered'], true);
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_reclaim_refund(text)") }}

-- Reclaims a refunded job's refund (ledger_reclaim_refund) for a caller that knows no usage: a
-- priced job is settled at its whole hold in the same transaction, nothing released, so that no
-- release can come later, outside the exposure bound a running job's hold was counted in. (The
-- original workflow's late-result fallback reclaims with it; later ones settle.)
-- Its webhook events (job.reclaimed, balance.low) are derived later from the reclaim row
-- (ledger_webhook_derive).
CREATE FUNCTION ledger_reclaim(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    r ledger_job_result;
BEGIN
    r := ledger_reclaim_refund(p_job_id);
    IF r.outcome = 'applied' THEN
        r := ledger_release(r.job, NULL, r.entry_id, r.balance_after, NULL);
    END IF;
    RETURN r;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_reclaim(text)") }}
