-- Takes the refund back when a refunded job's result landed after all: refunded -> recovered. No
-- balance check: the work was delivered, so the debt stands (the debt rule); the lower exposure
-- bound guarantees the balance still fits.
CREATE FUNCTION ledger_reclaim(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    r ledger_job_result;
BEGIN
    WITH recovered AS (
        UPDATE jobs SET state = 'recovered', is_reclaimed = true, reclaimed_at = now(), updated_at = now()
        WHERE id = p_job_id AND state = 'refunded' AND is_refunded AND NOT is_reclaimed
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
        RETURN r;
    END IF;
    RETURN ledger_job_unmatched(p_job_id, ARRAY['recovered']);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_reclaim(text)") }}
