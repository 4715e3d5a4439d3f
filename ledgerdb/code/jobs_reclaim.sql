-- Recovers a refunded job whose result landed after all: its refund taken back (refunded ->
-- recovered; no balance check: the work was delivered, so the debt stands, the debt rule; the
-- lower exposure bound guarantees the balance still fits) and, for a job with a price, its
-- settlement in the same statement: the units used recorded, p_units_used capped at the units its
-- charge held (NULL: the whole hold; always the one unit of a kind sold by the job), and the
-- unused part of the hold, (held − used) × unit price, given back in a release row when it is
-- above zero. p_output_ref, when not NULL, is kept on the job.
-- A tombstone of a refunded job is recovered the same way and stays a tombstone (deleted, its
-- state before deletion now recovered), its output not kept: deletion hides a job, it never
-- cancels what the customer owes for work that was delivered. A job that is not refunded answers
-- as ledger_job_unmatched says, p_done_states being the states its caller has nothing left to do
-- in, and a tombstone judged by the state it was deleted from, so that a retried step gets the
-- answer its first call lost.
--
-- One statement after the locks. The reclaim draws the hold again in today's order of spending
-- (block_draw_plan), from the spendable blocks and then from those not started yet (the debt is
-- owed now), then the debt for what the blocks cannot cover (drawn last). When nothing can
-- be released — no price, a kind sold by the job, or no usage known: the whole hold — that is all
-- (block_draw_write). Otherwise, as the raw SQL of the benchmark's metered lifecycle, the release
-- gives its part back to that draw, the last drawn first (the debt first of all), as block_return
-- would: both happen in this statement, so the release's share of each draw is computed from the
-- draw itself, and each block is set once, to what the two leave it. A release cannot land in an
-- ended block: it goes back to blocks this statement found not ended and holds locked. Nor can it
-- leave credits in a block beside a debt: it gives back to the debt first, and the draw reached
-- the debt only once every block that had not ended was empty.
CREATE FUNCTION ledger_recover(p_job_id text, p_units_used bigint, p_output_ref text, p_done_states text[])
RETURNS ledger_job_result
LANGUAGE plpgsql AS $$
DECLARE
    r          ledger_job_result;
    whole_hold boolean;
BEGIN
    -- The job under the reclaim's guard, then its account, locked in one statement (job before
    -- account, as in every transition: the subquery locks its row before the join reaches the
    -- account), so that the statement below takes its snapshot with both held and reads the
    -- account's blocks as they stand: every writer of an account's blocks holds the account's lock.
    SELECT x.whole_hold INTO whole_hold
    FROM (SELECT account_id, kind IS NULL OR unit = 'job' OR p_units_used IS NULL AS whole_hold FROM jobs
          WHERE id = p_job_id AND coalesce(state_before_delete, state) = 'refunded' AND is_refunded AND NOT is_reclaimed
          FOR UPDATE) AS x
    JOIN accounts a ON a.id = x.account_id
    FOR NO KEY UPDATE OF a;
    IF NOT FOUND THEN
        RETURN ledger_job_unmatched(p_job_id, p_done_states, true);
    END IF;

    IF whole_hold THEN
        -- Nothing to release: the reclaim alone, settled at the whole hold (a kind sold by the job
        -- costs its whole price whatever usage a result reports, so a report of 0 units can never
        -- turn its price into a release). The guard is the FIRST CTE.
        WITH recovered AS (
            UPDATE jobs SET state = CASE WHEN state = 'deleted' THEN 'deleted' ELSE 'recovered' END,
                            state_before_delete = CASE WHEN state = 'deleted' THEN 'recovered' END,
                            is_reclaimed = true, reclaimed_at = now(), updated_at = now(),
                            is_settled = kind IS NOT NULL,
                            settled_at = CASE WHEN kind IS NOT NULL THEN now() END,
                            units_used = held_units,
                            output_ref = CASE WHEN state = 'deleted' THEN output_ref ELSE coalesce(p_output_ref, output_ref) END
            WHERE id = p_job_id AND coalesce(state_before_delete, state) = 'refunded' AND is_refunded AND NOT is_reclaimed
            RETURNING jobs AS job
        ), debit AS (
            UPDATE accounts a SET balance = a.balance - (j.job).cost, awaiting_reclaim = a.awaiting_reclaim - (j.job).cost,
                                  updated_at = now()
            FROM recovered j
            WHERE a.id = (j.job).account_id
            RETURNING a.id AS account_id, a.balance, (j.job).id AS job_id, (j.job).cost
        ), entry AS (
            INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
            SELECT d.account_id, d.job_id, 'reclaim', -d.cost, d.balance FROM debit d
            RETURNING id, account_id, balance_after, -amount AS amount
        ), to_draw AS (
            SELECT account_id, id AS entry_id, amount FROM entry
        ), {{ template "block_draw_plan" "true" }}, {{ template "block_draw_write" true }}
        SELECT 'applied', e.id, e.balance_after, j.job
        INTO r.outcome, r.entry_id, r.balance_after, r.job
        FROM recovered j, entry e;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'job %: reclaim guard lost under its own lock', p_job_id USING ERRCODE = 'JB003';
        END IF;
        RETURN r;
    END IF;

    -- A metered job with its usage. The guard is the FIRST CTE (every CTE runs to completion
    -- whatever the later ones find). A refunded job is never settled (the settlement CHECK): the
    -- settlement is this one, its usage capped at the hold.
    WITH recovered AS (
        UPDATE jobs SET state = CASE WHEN state = 'deleted' THEN 'deleted' ELSE 'recovered' END,
                        state_before_delete = CASE WHEN state = 'deleted' THEN 'recovered' END,
                        is_reclaimed = true, reclaimed_at = now(), updated_at = now(),
                        is_settled = true, settled_at = now(), units_used = least(p_units_used, held_units),
                        output_ref = CASE WHEN state = 'deleted' THEN output_ref ELSE coalesce(p_output_ref, output_ref) END
        WHERE id = p_job_id AND coalesce(state_before_delete, state) = 'refunded' AND is_refunded AND NOT is_reclaimed
        RETURNING jobs AS job, (jobs.held_units - jobs.units_used) * jobs.unit_price AS released
    ), debit AS (
        UPDATE accounts a SET balance = a.balance - (j.job).cost + j.released,
                              awaiting_reclaim = a.awaiting_reclaim - (j.job).cost, updated_at = now()
        FROM recovered j
        WHERE a.id = (j.job).account_id
        RETURNING a.id AS account_id, a.balance, (j.job).id AS job_id, (j.job).cost, j.released
    ), entries AS (
        -- The reclaim's row first, its balance_after the balance before the release, as the
        -- audit's replay by row ID expects.
        INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
        SELECT d.account_id, d.job_id, x.kind, x.amount, x.balance_after
        FROM debit d, LATERAL (VALUES (1, 'reclaim', -d.cost, d.balance - d.released),
                                      (2, 'release', d.released, d.balance)) AS x (ord, kind, amount, balance_after)
        WHERE x.kind = 'reclaim' OR d.released > 0
        ORDER BY x.ord
        RETURNING id, account_id, kind, amount, balance_after
    ), reclaim AS (
        SELECT id, account_id, -amount AS amount, balance_after FROM entries WHERE kind = 'reclaim'
    ), release AS (
        SELECT id, amount, balance_after FROM entries WHERE kind = 'release'
    ), to_draw AS (
        SELECT account_id, id AS entry_id, amount FROM reclaim
    ), {{ template "block_draw_plan" "true" }}, drawn AS (
        -- The blocks' draws and, for what they cannot cover, the debt's (no block, drawn last),
        -- each with what was drawn after it.
        SELECT d.block_id, d.remaining, d.take, d.ord, sum(d.take) OVER (ORDER BY d.ord DESC) - d.take AS drawn_after
        FROM (SELECT id, remaining, take, ord FROM draw
              UNION ALL
              SELECT NULL, NULL, t.amount - (SELECT coalesce(sum(take), 0) FROM draw), 9223372036854775807 FROM to_draw t
             ) AS d (block_id, remaining, take, ord)
        WHERE d.take > 0
    ), back AS (
        SELECT d.block_id, least(d.take, rl.amount - d.drawn_after) AS give, d.ord
        FROM drawn d, release rl WHERE d.drawn_after < rl.amount
    ), blocks AS (
        -- From the locked read, as block_draw_write sets it, less the draw and plus the release.
        UPDATE credit_blocks b SET remaining = d.remaining - d.take + coalesce(bk.give, 0)
        FROM drawn d LEFT JOIN back bk ON bk.ord = d.ord
        WHERE b.id = d.block_id
    ), moves AS (
        INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
        SELECT m.account_id, m.entry_id, m.block_id, m.amount
        FROM (SELECT rc.account_id, rc.id AS entry_id, d.block_id, -d.take AS amount, 1 AS step, d.ord AS seq
              FROM reclaim rc, drawn d
              UNION ALL
              SELECT rc.account_id, rl.id, bk.block_id, bk.give, 2, -bk.ord
              FROM reclaim rc, release rl, back bk) AS m
        ORDER BY m.step, m.seq
    )
    -- With no release row, the reclaim's row answers.
    SELECT 'applied', coalesce(rl.id, rc.id), coalesce(rl.balance_after, rc.balance_after), j.job
    INTO r.outcome, r.entry_id, r.balance_after, r.job
    FROM recovered j CROSS JOIN reclaim rc LEFT JOIN release rl ON true;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job %: reclaim guard lost under its own lock', p_job_id USING ERRCODE = 'JB003';
    END IF;
    RETURN r;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_recover(text, bigint, text, text[])") }}

-- Reclaims a refunded job's refund for a caller that knows no usage (ledger_recover): a priced job
-- is settled at its whole hold in the same transaction, nothing released, so that no release can
-- come later, outside the exposure bound a running job's hold was counted in. (The original
-- workflow's late-result fallback reclaims with it; later ones settle.)
-- Its webhook events (job.reclaimed, balance.low) are derived later from the reclaim row
-- (ledger_webhook_derive).
CREATE FUNCTION ledger_reclaim(p_job_id text)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
BEGIN
    RETURN ledger_recover(p_job_id, NULL, NULL, ARRAY['recovered']);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_reclaim(text)") }}
