-- Credit blocks: where an account's credits are. Every money function that writes a row moves
-- the row's credits from or to blocks in the same transaction, through these helpers, with the
-- account's row already locked (so that the blocks of one account change one transaction at a
-- time). docs/design.md, "Credit blocks", has the rules.

-- The account's opening block: a paid, non-expiring block that credits return to when the row
-- that drew them predates the blocks. Made when first needed.
CREATE FUNCTION ledger_block_opening(p_account_id text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    b bigint;
BEGIN
    SELECT id INTO b FROM credit_blocks WHERE account_id = p_account_id AND is_opening;
    IF NOT FOUND THEN
        INSERT INTO credit_blocks (account_id, category, amount, remaining, is_opening, memo)
        VALUES (p_account_id, 'paid', 0, 0, true, 'credits held when credit blocks began')
        RETURNING id INTO b;
    END IF;
    RETURN b;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_block_opening(text)") }}

-- Moves p_amount credits (signed) of row p_entry_id into or out of block p_block_id (NULL: the
-- account's debt).
CREATE FUNCTION ledger_block_move(p_account_id text, p_entry_id bigint, p_block_id bigint, p_amount bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_amount = 0 THEN
        RETURN;
    END IF;
    INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
    VALUES (p_account_id, p_entry_id, p_block_id, p_amount);
    IF p_block_id IS NOT NULL THEN
        UPDATE credit_blocks SET remaining = remaining + p_amount WHERE id = p_block_id;
    END IF;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_block_move(text, bigint, bigint, bigint)") }}

-- Whether block {{ . }} (the alias the template is given) holds credits and has not ended: active
-- (not pending, not void), not marked expired and not past its expiry. A block past its expiry
-- holds credits until the expiry pass removes them, but none of them can be spent, nor pay a debt.
{{- define "block_holding_unended" }}{{ . }}.remaining > 0 AND {{ . }}.status = 'active' AND {{ . }}.expired_at IS NULL
          AND ({{ . }}.expires_at IS NULL OR {{ . }}.expires_at > now()){{ end }}
-- Whether block {{ . }} can be spent now: holding credits, not ended, and started. The one
-- statement of it, for the spendable sum, the draw's plan and the charge's check.
{{- define "block_spendable" }}{{ template "block_holding_unended" . }} AND {{ . }}.effective_at <= now(){{ end }}
-- The order of spending, over block {{ . }}'s columns: promotional before paid, then lower
-- priority, then sooner expiry (none last), then older.
{{- define "block_spending_order" }}{{ . }}.category = 'paid', {{ . }}.priority, {{ . }}.expires_at NULLS LAST, {{ . }}.created_at, {{ . }}.id{{ end }}

-- The credits an account can spend now: what its blocks in effect hold.
-- VOLATILE, not STABLE, on purpose: a charge that waited for another's lock on the account reads
-- with a fresh snapshot here and sees the other charge's draw, where a stable function would
-- answer from before it.
-- PL/pgSQL, not SQL, for speed: PostgreSQL 15 plans a SQL function's query again at every call
-- from another function's statement, where PL/pgSQL keeps its plan for the session.
CREATE FUNCTION ledger_block_spendable(p_account_id text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN (SELECT coalesce(sum(b.remaining), 0)::bigint FROM credit_blocks b
            WHERE b.account_id = p_account_id AND {{ template "block_spendable" "b" }});
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_block_spendable(text)") }}

-- The account's debt: what its rows drew beyond its blocks (a reclaim, a negative adjustment)
-- and no credits that reached the account since have paid yet.
CREATE FUNCTION ledger_block_debt(p_account_id text)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(-sum(amount), 0)::bigint FROM ledger_block_moves
    WHERE account_id = p_account_id AND block_id IS NULL
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_block_debt(text)") }}

-- The draw from an account's blocks, written once for every statement that takes credits from
-- them (ledger_block_draw; a charge's and a recovery's statements), in the order of spending
-- (block_spending_order).
--
-- block_draw_plan reads a CTE to_draw (account_id, entry_id, amount: the row and the credits, > 0,
-- it takes) and makes two: held, the account's blocks that hold credits and can give them, locked;
-- and draw (id, remaining, take, ord), what each gives in the order of spending — every block all
-- it holds until the amount is covered, a running sum over the ordered blocks saying where that
-- ends. What the blocks cannot cover is left to the statement. The template's argument is an SQL
-- boolean: whether the draw is one the debt would otherwise take (a reclaim, a negative
-- adjustment: never refused), which, after the spendable blocks, draws from the blocks not
-- started yet, in the same order, before it makes a debt — the debt is owed now, as a grant that
-- starts later pays it at once (the debt rule). A charge ("false") spends only the spendable
-- blocks. The statement must take its snapshot after its caller locked the account (every writer
-- of an account's blocks holds that lock), so that it reads the blocks as they stand.
{{- define "block_draw_plan" }}held AS (
    SELECT b.id, b.remaining, b.category, b.priority, b.expires_at, b.created_at
    {{- if ne . "false" }}, b.effective_at > now() AS later{{ end }}
    FROM credit_blocks b, to_draw t
    WHERE b.account_id = t.account_id AND
    {{- if eq . "false" }} {{ template "block_spendable" "b" }}
    {{- else }} {{ template "block_holding_unended" "b" }}
          AND (b.effective_at <= now() OR {{ . }}){{ end }}
    FOR UPDATE OF b
), draw AS (
    SELECT o.id, o.remaining, least(o.remaining, t.amount - o.before) AS take, o.ord
    FROM to_draw t, (SELECT h.id, h.remaining, sum(h.remaining) OVER w - h.remaining AS before, row_number() OVER w AS ord
                     FROM held h
                     WINDOW w AS (ORDER BY {{ if ne . "false" }}h.later, {{ end }}{{ template "block_spending_order" "h" }})) o
    WHERE o.before < t.amount
){{ end }}
-- block_draw_write takes what draw plans: each block set to what the locked read found less what
-- it gives, and the row's moves written in the order of spending. Given true, what the blocks
-- cannot cover is drawn on the debt (a move with no block) after them, in the same insert, so
-- that the moves' order is the draw's.
{{- define "block_draw_write" }}spent AS (
    UPDATE credit_blocks b SET remaining = d.remaining - d.take FROM draw d WHERE b.id = d.id
), drawn_moves AS (
    INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
    SELECT t.account_id, t.entry_id, m.block_id, -m.take
    FROM to_draw t, (SELECT id AS block_id, take, ord FROM draw
    {{- if . }}
                     UNION ALL
                     SELECT NULL, u.amount - (SELECT coalesce(sum(take), 0) FROM draw), 9223372036854775807 FROM to_draw u
    {{- end }}) AS m
    WHERE m.take > 0
    ORDER BY m.ord
){{ end }}

-- Draws p_amount (> 0) credits of row p_entry_id from the account's spendable blocks, in the
-- order of spending. When p_into_debt (a reclaim and a negative adjustment are never refused: the
-- debt rule), what they cannot cover is drawn from the blocks not started yet, then on the debt;
-- otherwise it is answered, undrawn. The caller holds the account's lock, and this statement's
-- snapshot is taken after it.
CREATE FUNCTION ledger_block_draw(p_account_id text, p_entry_id bigint, p_amount bigint, p_into_debt boolean)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    drawn bigint;
BEGIN
    WITH to_draw AS (
        SELECT p_account_id AS account_id, p_entry_id AS entry_id, p_amount AS amount
    ), {{ template "block_draw_plan" "p_into_debt" }}, {{ template "block_draw_write" false }}
    SELECT coalesce(sum(take), 0) INTO drawn FROM draw;
    IF drawn < p_amount AND p_into_debt THEN
        PERFORM ledger_block_move(p_account_id, p_entry_id, NULL, drawn - p_amount);
        drawn := p_amount;
    END IF;
    RETURN p_amount - drawn;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_block_draw(text, bigint, bigint, boolean)") }}

-- The words an expire row keeps as its memo, what the account's ledger listing shows of it: how
-- many credits expired, from which block (its category and when it was granted), and when the
-- block ended — "12 credits expired: block 7 (promotional, granted 1 Dec 2026) ended on 31 Dec
-- 2026" —, or, for credits a refund or a release (p_cause) returned to a block already ended, that
-- they came back to it after it had ended. Dates are UTC.
CREATE FUNCTION ledger_block_expiry_memo(blk credit_blocks, p_amount bigint, p_cause text)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_cause IS NULL THEN
        format('%s credits expired: block %s (%s, granted %s) ended on %s', p_amount, blk.id, blk.category,
               to_char(blk.created_at AT TIME ZONE 'UTC', 'FMDD Mon YYYY'),
               to_char(blk.expires_at AT TIME ZONE 'UTC', 'FMDD Mon YYYY'))
    ELSE
        format('%s credits expired: a %s returned them to block %s (%s, granted %s), which had %s', p_amount,
               p_cause, blk.id, blk.category, to_char(blk.created_at AT TIME ZONE 'UTC', 'FMDD Mon YYYY'),
               CASE WHEN blk.status = 'void' THEN 'been voided'
                    ELSE 'ended on ' || to_char(blk.expires_at AT TIME ZONE 'UTC', 'FMDD Mon YYYY') END)
    END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_block_expiry_memo(credit_blocks, bigint, text)") }}

-- The return of credits to the blocks a row drew them from, written once for every statement
-- that gives credits back to a job's charge (block_return_to_charge: a refund's, a delivery's
-- release). It reads a CTE to_return (account_id, entry_id: the row that gives back; source_id:
-- the row that drew the credits; amount, > 0) and gives back what the source drew from each block, the last drawn first,
-- so that what stays spent is what the order of spending chose; a debt the source drew on is paid
-- back first of all (it was drawn last). A source is returned to once: a refund gives back a
-- charge, a release part of the last draw, and no row returns to a draw a refund undid. It makes
-- gives (block_id, given, ord), writes each block's move in that order and credits the blocks,
-- and makes credited (ended): whether a block given to was past its time — void, marked expired
-- (a pass may have marked it after this transaction began, when its now() still read the block
-- as in effect) or past its expiry. Credits that came from no block (the source predates the
-- blocks), credits that landed in an ended block, and credits that must pay the account's debt
-- are ledger_block_return_rest's.
{{- define "block_return" }}returned_from AS (
    SELECT m.block_id, -sum(m.amount) AS drawn, max(m.id) AS last_move
    FROM ledger_block_moves m, to_return t
    WHERE m.entry_id = t.source_id AND m.amount < 0
    GROUP BY m.block_id
), gives AS (
    SELECT o.block_id, least(o.drawn, t.amount - o.before) AS given, o.ord
    FROM to_return t, (SELECT block_id, drawn, sum(drawn) OVER w - drawn AS before, row_number() OVER w AS ord
                       FROM returned_from
                       WINDOW w AS (ORDER BY block_id IS NOT NULL, last_move DESC)) o
    WHERE o.before < t.amount
), moved_back AS (
    INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount)
    SELECT t.account_id, t.entry_id, g.block_id, g.given FROM to_return t, gives g ORDER BY g.ord
), credited AS (
    -- Relative to the row, so that PostgreSQL applies it to the block's newest version should
    -- another transaction have changed the block since this statement's snapshot. Never in a
    -- statement that also draws from the blocks: a second update of a row in one statement is
    -- silently dropped (ledger_recover sets each block once, for its draw and release together).
    UPDATE credit_blocks b SET remaining = b.remaining + g.given FROM gives g
    WHERE b.id = g.block_id
    RETURNING b.status = 'void' OR b.expired_at IS NOT NULL OR b.expires_at <= now() AS ended
){{ end }}

-- block_return_to_charge returns a row's credits to the blocks its job's charge drew them from: it
-- reads the statement's CTE entry (id, account_id, amount: the row that gives back) and the
-- function's p_job_id, a running job's (charged once, never reclaimed), and makes block_return's
-- CTEs. block_return_outcome is what a return did, as three columns: the credits given back to the
-- blocks (and the debt), whether any landed in an ended block, and whether the account has a debt
-- (as it stood before the return: a charge, the source, never draws on the debt), which the
-- credits returned to blocks that have not ended must pay at once: one more read in the return's
-- statement, of the partial index of debts, which finds nothing for an account that never owed.
{{- define "block_return_to_charge" }}to_return AS (
    SELECT e.account_id, e.id AS entry_id, e.amount,
           (SELECT c.id FROM ledger_entries c WHERE c.job_id = p_job_id AND c.kind = 'charge') AS source_id
    FROM entry e
), {{ template "block_return" }}{{ end }}
{{- define "block_return_outcome" }}(SELECT coalesce(sum(given), 0) FROM gives), (SELECT coalesce(bool_or(ended), false) FROM credited),
           (SELECT coalesce(sum(d.amount), 0) < 0 FROM ledger_block_moves d, to_return t
            WHERE d.account_id = t.account_id AND d.block_id IS NULL){{ end }}

-- What a return (block_return) leaves over, off the money path of every job: p_unreturned
-- credits of row p_entry_id that came from no block (the row that drew them predates the blocks)
-- go to the opening block; when p_in_debt, the credits the row returned to blocks that have not
-- ended (the opening block's included) pay the account's debt at once, as far as they go, in the
-- order of spending: a debt is paid by the first credits that reach the account, whatever their
-- way in (the debt rule); and when p_any_ended, the credits that landed in a block whose time has
-- passed expire with it at once, each block's in an expire row of its own that names p_entry_id:
-- the customer gets back what was theirs, and loses what would have lapsed anyway — those pay no
-- debt, which would spend them after their expiry. Answers the credits that expired.
CREATE FUNCTION ledger_block_return_rest(p_account_id text, p_entry_id bigint, p_unreturned bigint, p_any_ended boolean,
                                         p_in_debt boolean)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    give        bigint;
    expired     bigint := 0;
    blk         credit_blocks;
    new_balance bigint;
    expiry_id   bigint;
BEGIN
    IF p_unreturned > 0 THEN
        PERFORM ledger_block_move(p_account_id, p_entry_id, ledger_block_opening(p_account_id), p_unreturned);
    END IF;
    IF p_in_debt THEN
        FOR blk IN
            SELECT b.* FROM credit_blocks b
            WHERE b.id IN (SELECT block_id FROM ledger_block_moves WHERE entry_id = p_entry_id AND amount > 0)
              AND {{ template "block_holding_unended" "b" }}
            ORDER BY {{ template "block_spending_order" "b" }}
        LOOP
            PERFORM ledger_block_pay_debt(p_account_id, p_entry_id, blk.id,
                (SELECT sum(amount) FROM ledger_block_moves WHERE entry_id = p_entry_id AND block_id = blk.id)::bigint);
        END LOOP;
    END IF;
    IF NOT p_any_ended THEN
        RETURN 0;
    END IF;
    FOR blk IN
        SELECT b.* FROM credit_blocks b
        WHERE b.id IN (SELECT block_id FROM ledger_block_moves WHERE entry_id = p_entry_id AND amount > 0)
          -- expired_at too: a pass may have marked the block expired after this transaction
          -- began, when its now() still read the block as in effect.
          AND (b.status = 'void' OR b.expired_at IS NOT NULL OR b.expires_at <= now())
        ORDER BY b.id
        FOR UPDATE
    LOOP
        give := (SELECT sum(amount) FROM ledger_block_moves WHERE entry_id = p_entry_id AND block_id = blk.id);
        give := least(give, blk.remaining);
        CONTINUE WHEN give <= 0;
        UPDATE accounts SET balance = balance - give, updated_at = now()
        WHERE id = p_account_id
        RETURNING balance INTO new_balance;
        INSERT INTO ledger_entries (account_id, kind, amount, balance_after, block_id, caused_by, memo)
        VALUES (p_account_id, 'expire', -give, new_balance, blk.id, p_entry_id,
                ledger_block_expiry_memo(blk, give, (SELECT le.kind FROM ledger_entries le WHERE le.id = p_entry_id)))
        RETURNING id INTO expiry_id;
        PERFORM ledger_block_move(p_account_id, expiry_id, blk.id, -give);
        expired := expired + give;
    END LOOP;
    RETURN expired;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_block_return_rest(text, bigint, bigint, boolean, boolean)") }}

-- Pays the account's debt from block p_block_id, as far as the block holds and at most p_most
-- credits (NULL: no bound), in moves of row p_entry_id: out of the block, and onto the debt.
-- A grant pays the debt first from its block, just granted, and a positive adjustment from the
-- opening block it joins; a refund or a release from the blocks that have not ended it returned
-- credits to, at most what it returned to each (ledger_block_return_rest): the debt rule.
CREATE FUNCTION ledger_block_pay_debt(p_account_id text, p_entry_id bigint, p_block_id bigint, p_most bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    pay bigint;
BEGIN
    -- least ignores a NULL p_most.
    pay := least(ledger_block_debt(p_account_id), (SELECT remaining FROM credit_blocks WHERE id = p_block_id), p_most);
    IF pay > 0 THEN
        PERFORM ledger_block_move(p_account_id, p_entry_id, p_block_id, -pay);
        PERFORM ledger_block_move(p_account_id, p_entry_id, NULL, pay);
    END IF;
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_block_pay_debt(text, bigint, bigint, bigint)") }}
