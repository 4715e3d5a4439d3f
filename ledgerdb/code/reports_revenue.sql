-- The revenue report: what paid credits did over a period, read from the moves of credits into
-- and out of credit blocks (ledger_block_moves), each valued at its block's cost basis, and the
-- audit's check that the report recognises only delivered work. docs/design.md, "Statements and
-- revenue", has the rules; each is stated again here by the statement that applies it.
--
-- Only delivered work is revenue. Paid credits are deferred while a block holds them and while a
-- running job holds them (its charge's draws, not yet returned); they are recognised when the job
-- is settled — delivered, or recovered by a late result —, dated by the settlement, at the net of
-- the job's draws (charge, reclaim) less its returns (refund, release). A refunded job's refund
-- returns its draws: it nets nothing, and is never revenue. Every move of a block falls in exactly
-- one class (granted, recognised, lapsed, adjusted, or held by a running job) at exactly one time,
-- so deferred at the start + granted − recognised − lapsed + adjusted = deferred at the end in
-- every period, by construction, and one period's end is the next one's start.
--
-- Every sum is numeric — credits times cost basis, summed, never rounded — and is cast to bigint
-- only at the end: a sum of credits past what a bigint holds raises numeric_value_out_of_range.

-- revenue_moves is the block moves in scope, given "account" (p_account_id's: found by its blocks
-- and its debt, both indexed, so that a report or an audit of one account never reads the whole
-- table) or "all" (every account's), with the row that made each (kind, amount, time, job; none
-- for the move that opened an opening block) and the block it moved (category, cost basis, time;
-- none for a move on the debt).
{{- define "revenue_moves" }}SELECT mv.id, mv.account_id, mv.entry_id, mv.block_id, mv.amount,
           e.kind, e.amount AS entry_amount, e.created_at AS entry_at, e.job_id,
           b.category, b.cost_basis, b.created_at AS block_at
    FROM {{ if eq . "all" }}ledger_block_moves mv{{ else }}(
        SELECT in_blocks.* FROM credit_blocks own JOIN ledger_block_moves in_blocks ON in_blocks.block_id = own.id
        WHERE own.account_id = p_account_id
        UNION ALL
        SELECT on_debt.* FROM ledger_block_moves on_debt WHERE on_debt.account_id = p_account_id AND on_debt.block_id IS NULL
    ) AS mv{{ end }}
    LEFT JOIN ledger_entries e ON e.id = mv.entry_id
    LEFT JOIN credit_blocks b ON b.id = mv.block_id{{ end }}

-- revenue_classed is every block move in scope (revenue_moves, given the same), classed and
-- dated, a debt payment cut in two; credits signed as the move is (into the block positive). A
-- move of a job's row also names the job and the state it stands in.
--
--   granted     a grant's move into its block; the move that opened an opening block (dated by
--               the block); and what a refund or a release returns to the opening block for a
--               charge made before credit blocks began — those credits were in no block, and
--               join the opening balance when they come back.
--   recognised  a job's draws and returns (charge and reclaim draws, refund and release
--               returns), dated by the job's settlement — the last of its rows (a release, the
--               reclaim) or its delivery when that wrote none —, once the job is delivered or
--               recovered. A refunded job's are dated by its refund and net nothing: the refund
--               returned every credit the charge drew (what it returns to an ended block lapses
--               in that block's expire row). Credits a job that is neither delivered nor recovered
--               keeps spent are revenue recognised for work not delivered: the audit reports
--               them (ledger_revenue_audit). And the part of a debt payment that paid debts of
--               delivered work.
--   lapsed      an expire row's move: breakage.
--   adjusted    an adjustment's moves (but a positive one's payments), and the part of a debt
--               payment that paid debts no work was delivered for.
--   held        a running job's draws: still deferred, nothing yet delivered. Dated never.
--
-- The debt's own moves (no block) are no class: they are not credits a customer holds.
--
-- A debt payment is a block's negative move written by a grant, a positive adjustment, a refund or
-- a release: credits taken out of the block the row put them in, onto the account's debt. (A row's
-- other positive moves on the debt are returns: a release giving back to its own reclaim's debt
-- draw.) A payment takes the class of the debt it paid, so that only delivered work is revenue: a
-- reclaim's debt — work delivered and not paid for — is delivered work, and so is the debt the
-- account had when credit blocks began (its move names no row: read as the debt rule's case); any
-- other debt (a negative adjustment's) is not. Debts are paid first made, first paid: the debts
-- and the payments are laid end to end per account, each in the order it was made, and a payment
-- pays what of the debts it overlaps. A reclaim's debt is what it drew on the debt less what its
-- job's release gave back to it, in the same transaction. A payment only ever pays debts made
-- before it, so its class never changes once written.
{{- define "revenue_classed" }}WITH m AS (
        {{ template "revenue_moves" . }}
    ), pieces AS (
        -- The debt payments, laid end to end per account in the order they were made.
        SELECT m.account_id, m.id, -m.amount AS credits,
               sum(-m.amount) OVER (PARTITION BY m.account_id ORDER BY m.id) AS upto
        FROM m
        WHERE m.block_id IS NOT NULL AND m.amount < 0
          AND (m.kind IN ('grant', 'refund', 'release') OR (m.kind = 'adjustment' AND m.entry_amount > 0))
    ), returned AS (
        -- What each job's refund and release rows gave back to its reclaim's debt draw: their
        -- positive moves on the debt less the payments among them (their negative block moves).
        SELECT r.job_id, sum(r.credits) AS credits
        FROM (SELECT m.job_id,
                     coalesce(sum(m.amount) FILTER (WHERE m.block_id IS NULL AND m.amount > 0), 0)
                     + coalesce(sum(m.amount) FILTER (WHERE m.block_id IS NOT NULL AND m.amount < 0), 0) AS credits
              FROM m WHERE m.kind IN ('refund', 'release')
              GROUP BY m.job_id, m.entry_id) r
        GROUP BY r.job_id
    ), owed AS (
        -- The debts, laid end to end per account in the order they were made, each saying whether
        -- it is delivered work's.
        SELECT o.account_id, o.owed, sum(o.owed) OVER (PARTITION BY o.account_id ORDER BY o.id) AS upto, o.delivered
        FROM (SELECT d.account_id, d.id,
                     -d.amount - CASE WHEN d.kind = 'reclaim' THEN coalesce(r.credits, 0) ELSE 0 END AS owed,
                     d.entry_id IS NULL OR d.kind = 'reclaim' AS delivered
              FROM m d LEFT JOIN returned r ON r.job_id = d.job_id
              WHERE d.block_id IS NULL AND d.amount < 0) o
    ), paid AS (
        -- Each payment with what of it overlaps debts no work was delivered for (least and
        -- greatest skip NULLs: a payment that overlaps no such debt is filtered out).
        SELECT p.id, coalesce(sum(least(p.upto, o.upto) - greatest(p.upto - p.credits, o.upto - o.owed))
                                  FILTER (WHERE o.owed IS NOT NULL), 0)::bigint AS to_adjustments
        FROM pieces p
        LEFT JOIN owed o ON o.account_id = p.account_id AND NOT o.delivered
             AND least(p.upto, o.upto) > greatest(p.upto - p.credits, o.upto - o.owed)
        GROUP BY p.id
    ), jobs_moved AS (
        -- Each job whose rows moved credits: where it stands, whether its charge moved any (a
        -- charge made before the blocks began moved none), and the time of its settlement (or
        -- refund): its last row, or its delivery when that wrote no row. Rows are dated by their
        -- transaction's start, and a delivery's time is that of the transaction that delivered.
        -- (A job's last row moved credits: every row since the blocks began moves its amount.)
        SELECT j.id, coalesce(j.state_before_delete, j.state) AS state, j.is_reclaimed,
               bool_or(m.kind = 'charge') AS charge_moved, greatest(max(m.entry_at), j.delivered_at) AS at
        FROM m JOIN jobs j ON j.id = m.job_id
        GROUP BY j.id
    ), classed AS (
        SELECT m.account_id, m.category, coalesce(m.cost_basis, 0) AS cost_basis, m.amount,
               paid.to_adjustments, jm.id AS job_id, jm.state AS job_state,
               CASE
                   WHEN m.entry_id IS NULL OR (m.kind = 'grant' AND m.amount > 0) THEN 'granted'
                   WHEN paid.id IS NOT NULL THEN 'payment'
                   WHEN m.kind = 'expire' THEN 'lapsed'
                   WHEN m.kind = 'adjustment' THEN 'adjusted'
                   WHEN m.kind IN ('refund', 'release') AND NOT jm.charge_moved
                        AND (m.kind = 'refund' OR NOT jm.is_reclaimed) THEN 'returned before the blocks'
                   WHEN jm.state = 'running' THEN 'held'
                   ELSE 'job'
               END AS what,
               CASE WHEN m.entry_id IS NULL THEN m.block_at ELSE m.entry_at END AS at,
               jm.at AS job_at
        FROM m
        LEFT JOIN paid ON paid.id = m.id
        LEFT JOIN jobs_moved jm ON jm.id = m.job_id
        WHERE m.block_id IS NOT NULL
    )
    SELECT c.account_id, c.category, c.cost_basis,
           CASE WHEN c.what = 'held' THEN NULL WHEN c.what = 'job' THEN greatest(c.at, c.job_at) ELSE c.at END,
           CASE c.what WHEN 'payment' THEN 'recognised' WHEN 'job' THEN 'recognised'
                       WHEN 'returned before the blocks' THEN 'granted' ELSE c.what END,
           c.amount + coalesce(c.to_adjustments, 0),
           CASE WHEN c.what IN ('job', 'held') THEN c.job_id END,
           CASE WHEN c.what IN ('job', 'held') THEN c.job_state END
    FROM classed c
    WHERE c.amount + coalesce(c.to_adjustments, 0) <> 0
    UNION ALL
    -- The part of a payment that paid debts no work was delivered for.
    SELECT c.account_id, c.category, c.cost_basis, c.at, 'adjusted', -c.to_adjustments, NULL, NULL
    FROM classed c
    WHERE c.to_adjustments <> 0{{ end }}

-- The classed moves (revenue_classed) of one account (p_account_id) or of every account (NULL).
-- One statement for each, so that each is planned once for what it reads: one account's moves
-- through its indexes, every account's whole.
CREATE FUNCTION ledger_revenue_classed(p_account_id text)
RETURNS TABLE (account_id text, category text, cost_basis numeric, at timestamptz, what text,
               credits bigint, job_id text, job_state text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    IF p_account_id IS NULL THEN
        RETURN QUERY {{ template "revenue_classed" "all" }};
    ELSE
        RETURN QUERY {{ template "revenue_classed" "account" }};
    END IF;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_revenue_classed(text)") }}

-- The revenue report of [p_from, p_to) over one account (p_account_id) or every account (NULL):
-- deferred at p_from, what was granted, recognised, lapsed and adjusted in the period (a class's
-- credits in the period, signed so that opening + granted − recognised − lapsed + adjusted =
-- closing), deferred at p_to, and the promotional credits delivered work spent in the period
-- (recognised the same way: at settlement) — never revenue. Deferred at a time is every paid
-- credit a block or a running job holds then: the paid blocks' classed moves dated before it.
-- A paid block granted without a cost basis counts its credits at no money. A period that holds
-- no time, or an unknown account, is refused naming it.
CREATE FUNCTION ledger_revenue(p_from timestamptz, p_to timestamptz, p_account_id text DEFAULT NULL)
RETURNS TABLE (deferred_opening_credits bigint, deferred_opening_amount numeric,
               granted_credits bigint, granted_amount numeric,
               recognised_credits bigint, recognised_amount numeric,
               lapsed_credits bigint, lapsed_amount numeric,
               adjusted_credits bigint, adjusted_amount numeric,
               deferred_closing_credits bigint, deferred_closing_amount numeric,
               promotional_spent bigint)
LANGUAGE plpgsql STABLE {{ template "run_as_owner" . }} AS $$
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR NOT p_from < p_to THEN
        RAISE EXCEPTION 'period: runs from % to %; its start must be before its end', p_from, p_to
            USING ERRCODE = '22023';
    END IF;
    IF p_account_id IS NOT NULL AND NOT EXISTS (SELECT FROM accounts a WHERE a.id = p_account_id) THEN
        RAISE EXCEPTION 'account %: unknown account', p_account_id USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT coalesce(sum(c.credits) FILTER (WHERE x.paid AND c.at < p_from), 0)::bigint,
           coalesce(sum(c.credits * c.cost_basis) FILTER (WHERE x.paid AND c.at < p_from), 0),
           coalesce(sum(c.credits) FILTER (WHERE x.paid AND x.within AND c.what = 'granted'), 0)::bigint,
           coalesce(sum(c.credits * c.cost_basis) FILTER (WHERE x.paid AND x.within AND c.what = 'granted'), 0),
           coalesce(-sum(c.credits) FILTER (WHERE x.paid AND x.within AND c.what = 'recognised'), 0)::bigint,
           coalesce(-sum(c.credits * c.cost_basis) FILTER (WHERE x.paid AND x.within AND c.what = 'recognised'), 0),
           coalesce(-sum(c.credits) FILTER (WHERE x.paid AND x.within AND c.what = 'lapsed'), 0)::bigint,
           coalesce(-sum(c.credits * c.cost_basis) FILTER (WHERE x.paid AND x.within AND c.what = 'lapsed'), 0),
           coalesce(sum(c.credits) FILTER (WHERE x.paid AND x.within AND c.what = 'adjusted'), 0)::bigint,
           coalesce(sum(c.credits * c.cost_basis) FILTER (WHERE x.paid AND x.within AND c.what = 'adjusted'), 0),
           coalesce(sum(c.credits) FILTER (WHERE x.paid), 0)::bigint,
           coalesce(sum(c.credits * c.cost_basis) FILTER (WHERE x.paid), 0),
           coalesce(-sum(c.credits) FILTER (WHERE NOT x.paid AND x.within AND c.what = 'recognised'), 0)::bigint
    FROM ledger_revenue_classed(p_account_id) c,
         LATERAL (SELECT c.category = 'paid' AS paid, c.at >= p_from AS within) AS x
    WHERE c.at < p_to;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_revenue(timestamptz, timestamptz, text)") }}

-- The audit's revenue rule for one account: revenue is recognised for delivered work only. The
-- paid credits the report recognises of all time (recognised_credits, recognised_amount: the
-- report's own sum, ledger_revenue from -infinity to infinity) must be what delivered and
-- recovered jobs netted from paid blocks plus the paid credits that paid debts of delivered work
-- (delivered_credits, delivered_amount); undelivered_jobs names the jobs that are neither
-- delivered nor recovered (nor running: a running job's credits are held) whose paid credits are
-- recognised all the same — a refund that did not give back what its charge drew.
CREATE FUNCTION ledger_revenue_audit(p_account_id text)
RETURNS TABLE (recognised_credits bigint, recognised_amount numeric,
               delivered_credits bigint, delivered_amount numeric, undelivered_jobs text[])
LANGUAGE plpgsql STABLE {{ template "run_as_owner" . }} AS $$
BEGIN
    RETURN QUERY
    WITH c AS (
        SELECT x.credits, x.cost_basis, x.job_id,
               x.job_id IS NULL OR x.job_state IN ('delivered', 'recovered') AS delivered
        FROM ledger_revenue_classed(p_account_id) x WHERE x.category = 'paid' AND x.what = 'recognised'
    ), undelivered AS (
        SELECT c.job_id FROM c WHERE NOT c.delivered
        GROUP BY c.job_id HAVING sum(c.credits) <> 0 OR sum(c.credits * c.cost_basis) <> 0
    )
    SELECT r.recognised_credits, r.recognised_amount,
           (SELECT coalesce(-sum(c.credits) FILTER (WHERE c.delivered), 0) FROM c)::bigint,
           (SELECT coalesce(-sum(c.credits * c.cost_basis) FILTER (WHERE c.delivered), 0) FROM c),
           (SELECT coalesce(array_agg(u.job_id ORDER BY u.job_id), '{}') FROM undelivered u)
    FROM ledger_revenue('-infinity', 'infinity', p_account_id) r;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_revenue_audit(text)") }}
