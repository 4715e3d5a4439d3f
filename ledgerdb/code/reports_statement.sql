-- The statement: what one account's money did over a period [p_from, p_to), read from its rows
-- alone. docs/design.md, "Statements and revenue", has the rules; each is stated again here by the
-- statement that applies it.
--
-- One row per line of the statement, in the order it lists them (the order of its CSV,
-- ledgerdb.WriteStatementCSV):
--
--   line     'opening', then 'rows' for each line, then 'closing'.
--   kind     a rows line's kind of ledger row; NULL on the opening and the closing.
--   category a grant line's block category ('paid', 'promotional'); NULL on every other line.
--   job_kind a charge line's job kind ('render-4k'); NULL on every other line.
--   rows     how many rows a rows line sums; NULL on the opening and the closing.
--   credits  the line's sum: the balance at p_from (opening), the rows' sum (rows), the balance at
--            p_to (closing). Negative for charges, reclaims and expiries.
--   final    whether the statement can no longer change (below); the same on every row.
--
-- It runs as its caller, the service's role, and is VOLATILE, for the rule of final statements:
-- whether the period is closed is read first, in its own snapshot, and the rows after, in a later
-- one (a VOLATILE function takes a snapshot for each statement it runs; a STABLE one would read
-- both in its caller's, taken before either).
--
-- A period that holds no time, or an unknown account, is refused naming it.
CREATE FUNCTION ledger_statement(p_account_id text, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (line text, kind text, category text, job_kind text, rows bigint, credits bigint, final boolean)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_final boolean;
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR NOT p_from < p_to THEN
        RAISE EXCEPTION 'period: runs from % to %; its start must be before its end', p_from, p_to
            USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT FROM accounts a WHERE a.id = p_account_id) THEN
        RAISE EXCEPTION 'account %: unknown account', p_account_id USING ERRCODE = '22023';
    END IF;

    -- Final: the period had ended, and no transaction that could still write a row dated inside
    -- it was open, when this was read. A row is dated by its transaction's start (created_at is
    -- now()), so a money transaction that began before p_to and commits later lands inside the
    -- period after the fact. This is read before the rows, in its own snapshot: a transaction open
    -- now is seen here, one that committed before now is in the rows' snapshot taken after, and one
    -- that starts after now dates its rows after p_to. Every money transaction runs as the
    -- service's role, which sees its own backends' xact_start in pg_stat_activity (so this function
    -- runs as its caller, never as the owner); any open transaction counts, since one dates its
    -- rows by its start even before its first write gives it a transaction ID.
    SELECT p_to <= clock_timestamp() AND NOT EXISTS (
               SELECT FROM pg_stat_activity s
               WHERE s.datname = current_database() AND s.pid <> pg_backend_pid() AND s.xact_start < p_to)
    INTO v_final;

    -- One statement, one snapshot: the opening, the lines and the closing are sums of the same
    -- rows, so opening + every line's credits = closing by construction, and one period's closing
    -- is the next one's opening (both are the sum of the rows before the instant they share).
    RETURN QUERY
    WITH e AS (
        -- The account's rows before p_to, each with its line's detail: a grant's block category
        -- (a grant written before credit blocks began made none: it counts as paid, as its credits
        -- do), a charge's job kind.
        SELECT le.kind, le.amount, le.created_at, CASE le.kind
                   WHEN 'grant' THEN coalesce(b.category, 'paid')
                   WHEN 'charge' THEN coalesce(j.kind, '')
                   ELSE '' END AS detail
        FROM ledger_entries le
        LEFT JOIN credit_blocks b ON le.kind = 'grant' AND b.id = le.block_id
        LEFT JOIN jobs j ON le.kind = 'charge' AND j.id = le.job_id
        WHERE le.account_id = p_account_id AND le.created_at < p_to
    ), lines AS (
        -- The period's rows summed by kind and detail: a kind with no row in the period has no line.
        SELECT e.kind, e.detail, count(*) AS n, sum(e.amount)::bigint AS credits
        FROM e WHERE e.created_at >= p_from
        GROUP BY e.kind, e.detail
    )
    SELECT x.line, x.kind, x.category, x.job_kind, x.rows, x.credits, v_final
    FROM (
        -- Opening: the sum of every row written before p_from.
        SELECT 0 AS part, 0 AS kind_order, 'opening' AS line, NULL::text AS kind, NULL::text AS detail,
               NULL::text AS category, NULL::text AS job_kind, NULL::bigint AS rows,
               coalesce(sum(e.amount) FILTER (WHERE e.created_at < p_from), 0)::bigint AS credits
        FROM e
        UNION ALL
        -- The lines: money in, then what jobs took and gave back, then corrections and expiries
        -- (the order of ledgerdb.EntryKinds); within a kind, the line without detail, then paid
        -- before promotional, then job kinds by name.
        SELECT 1, array_position(ARRAY['grant', 'charge', 'refund', 'reclaim', 'release', 'adjustment', 'expire'], l.kind),
               'rows', l.kind, l.detail,
               CASE WHEN l.kind = 'grant' THEN l.detail END,
               CASE WHEN l.kind = 'charge' THEN l.detail END,
               l.n, l.credits
        FROM lines l
        UNION ALL
        -- Closing: the sum of every row written before p_to.
        SELECT 2, 0, 'closing', NULL, NULL, NULL, NULL, NULL, coalesce(sum(e.amount), 0)::bigint
        FROM e
    ) x
    ORDER BY x.part, x.kind_order, x.detail <> '', x.detail <> 'paid', x.detail <> 'promotional',
             x.detail COLLATE "C";
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_statement(text, timestamptz, timestamptz)") }}
