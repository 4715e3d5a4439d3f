-- Delivers a running job whose work succeeded: running -> delivered, and, for a job with a price,
-- its settlement in the same statement: the units used recorded, p_units_used capped at the units
-- its charge held (the hold is a hard spending cap; NULL: the whole hold; always the one unit of a
-- kind sold by the job), and the unused part of the hold, (held − used) × unit price, given back
-- in a release row when it is above zero, to the blocks the charge drew it from
-- (block_return_to_charge), paying the account's debt first if it has one.
-- p_output_ref is kept on the job. Answers applied with the release row, or with none, NULL: the
-- job is not running, and the caller says why (ledger_deliver) or recovers it (ledger_settle).
CREATE FUNCTION ledger_deliver_running(p_job_id text, p_attempts integer, p_units_used bigint, p_output_ref text)
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    r         ledger_job_result;
    released  bigint;
    returned  bigint;
    any_ended boolean;
    in_debt   boolean;
BEGIN
    -- The job under its guard, then its account, locked in one statement (job before account, as
    -- in every transition), so that the statement below takes its snapshot with both held.
    PERFORM 1 FROM accounts a
    WHERE a.id = (SELECT account_id FROM jobs WHERE id = p_job_id AND state = 'running' FOR UPDATE)
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    -- One statement, its guard the FIRST CTE (every CTE runs to completion whatever the later ones
    -- find): the delivery and settlement, and with a release above zero, the credit, its row and
    -- the credits back to the blocks.
    WITH delivered AS (
        -- A kind sold by the job costs its whole price whatever usage a result reports: it
        -- settles at its one unit, so a report of 0 units can never turn its price into a release.
        UPDATE jobs SET state = 'delivered', delivered_at = now(), updated_at = now(), outcome_xid = pg_current_xact_id(),
                        attempts = greatest(attempts, p_attempts), output_ref = p_output_ref,
                        -- The balance this delivery saw, for its event when no release row is written.
                        balance_at_delivery = (SELECT a.balance FROM accounts a WHERE a.id = jobs.account_id),
                        is_settled = kind IS NOT NULL,
                        settled_at = CASE WHEN kind IS NOT NULL THEN now() END,
                        units_used = CASE WHEN kind IS NULL THEN NULL
                                          WHEN unit = 'job' THEN held_units
                                          ELSE least(coalesce(p_units_used, held_units), held_units) END
        WHERE id = p_job_id AND state = 'running'
        RETURNING jobs AS job, coalesce((jobs.held_units - jobs.units_used) * jobs.unit_price, 0) AS released
    ), credit AS (
        UPDATE accounts a SET balance = a.balance + d.released, updated_at = now()
        FROM delivered d
        WHERE a.id = (d.job).account_id AND d.released > 0
        RETURNING a.id AS account_id, a.balance
    ), entry AS (
        INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
        SELECT c.account_id, (d.job).id, 'release', d.released, c.balance FROM delivered d, credit c
        RETURNING id, account_id, amount, balance_after
    ), {{ template "block_return_to_charge" }}
    SELECT 'applied', e.id, e.balance_after, d.job, d.released,
           {{ template "block_return_outcome" }}
    INTO r.outcome, r.entry_id, r.balance_after, r.job, released, returned, any_ended, in_debt
    FROM delivered d LEFT JOIN entry e ON true;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job %: delivery guard lost under its own lock', p_job_id USING ERRCODE = 'JB003';
    END IF;
    -- The rare rest: what landed in a block whose time has passed expires with it, and what came
    -- back to the others pays the account's debt first.
    IF released > 0 AND (returned < released OR any_ended OR in_debt)
       AND ledger_block_return_rest((r.job).account_id, r.entry_id, released - returned, any_ended, in_debt) > 0 THEN
        SELECT a.balance INTO r.balance_after FROM accounts a WHERE a.id = (r.job).account_id;
    END IF;
    RETURN r;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_deliver_running(text, integer, bigint, text)") }}
