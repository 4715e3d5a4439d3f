-- Settles a delivered or recovered job that has a price, inside the caller's transaction: records
-- the units used (p_units_used capped at the held units; NULL: the whole hold; always the one
-- unit of a kind sold by the job), sets the settled
-- flag, and gives back the unused part of the hold, (held − used) × unit price, in one release row
-- when it is above zero. A job without a price (submitted with a cost, before the price list) has
-- nothing to settle. Answers applied with the row it wrote — or, with none, the caller's row
-- (p_entry_id, p_balance_after: a reclaim made in the same transaction). p_output_ref, when not
-- NULL, is kept on the job in the same update (a tombstone keeps none): a late result's output,
-- without a statement of its own.
CREATE FUNCTION ledger_release(j jobs, p_units_used bigint, p_entry_id bigint, p_balance_after bigint, p_output_ref text)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    job_id   text := j.id;
    released bigint;
    r        ledger_job_result;
BEGIN
    IF j.kind IS NULL THEN
        IF p_output_ref IS NOT NULL AND j.state <> 'deleted' THEN
            UPDATE jobs SET output_ref = p_output_ref WHERE id = job_id RETURNING * INTO j;
        END IF;
        RETURN ledger_job_result_of('applied', p_entry_id, p_balance_after, j);
    END IF;
    -- One statement on the money path of every metered job, its guard (not settled yet) in the
    -- first CTE: the settlement, and with a release above zero, the credit and its row.
    WITH settled AS (
        -- A kind sold by the job costs its whole price whatever usage a result reports: it
        -- settles at its one unit, so a report of 0 units can never turn its price into a release.
        UPDATE jobs SET is_settled = true, settled_at = now(), updated_at = now(),
                        output_ref = CASE WHEN state = 'deleted' THEN output_ref ELSE coalesce(p_output_ref, output_ref) END,
                        units_used = CASE WHEN j.unit = 'job' THEN j.held_units
                                          ELSE least(coalesce(p_units_used, j.held_units), j.held_units) END
        WHERE id = job_id AND NOT is_settled
        RETURNING jobs AS job, (jobs.held_units - jobs.units_used) * jobs.unit_price AS released
    ), credit AS (
        UPDATE accounts a SET balance = a.balance + s.released, updated_at = now()
        FROM settled s
        WHERE a.id = (s.job).account_id AND s.released > 0
        RETURNING a.balance
    ), entry AS (
        INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
        SELECT (s.job).account_id, (s.job).id, 'release', s.released, c.balance FROM settled s, credit c
        RETURNING id, balance_after
    )
    -- With no release row, the caller's row answers (a reclaim made in the same transaction).
    SELECT 'applied', coalesce(e.id, p_entry_id), coalesce(e.balance_after, p_balance_after), s.job, s.released
    INTO r.outcome, r.entry_id, r.balance_after, r.job, released
    FROM settled s LEFT JOIN entry e ON true;
    IF NOT FOUND THEN
        -- Settled before (its callers hold the job's row lock, so only a caller that did not
        -- check could get here): answer it as it stands, writing nothing.
        SELECT * INTO j FROM jobs WHERE id = job_id;
        RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
    END IF;
    -- Back to the blocks the hold was last drawn from, the last drawn first; what lands in an
    -- expired one expires with it.
    IF released > 0 AND ledger_block_return((r.job).account_id, ledger_block_last_draw(job_id), r.entry_id, released) > 0 THEN
        SELECT a.balance INTO r.balance_after FROM accounts a WHERE a.id = (r.job).account_id;
    END IF;
    RETURN r;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_release(jobs, bigint, bigint, bigint, text)") }}
