-- One derive pass: writes the webhook events of the transactions committed since the last pass
-- (at most p_limit transactions' worth), for accounts that have an enabled endpoint, and queues
-- them (ledger_webhook_materialize, then the top-up requests: ledger_webhook_materialize_topups);
-- answers how many events it wrote and whether more transactions are waiting. Delivery workers
-- call it before each claim; one pass runs at a time (a worker that finds another pass running
-- skips its own and answers 0, false).
--
-- Why it can never skip a row: a pass reads only the transactions below the oldest one running
-- when it starts (pg_snapshot_xmin of a snapshot taken before this transaction has an ID of its
-- own). Each of those is over, committed or rolled back, so its rows are all visible now or never
-- will be; and any transaction not over yet has, or will get, an ID at or above that bound, so no
-- row can appear later below it. The cursor moves to the bound, and the next pass starts there.
-- Reading by row id instead would skip a row whose transaction took its id and committed after a
-- later id was read. A transaction held open holds the bound back, so events wait for it — they
-- are delayed, never lost (docs/operations.md, "Webhooks").
--
-- Accounts without an enabled endpoint cost the pass an index look-up per row and nothing else:
-- their events are not written (a replay to an endpoint made later derives them then).
CREATE FUNCTION ledger_webhook_derive(p_limit integer)
RETURNS TABLE (derived integer, more boolean)
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    -- Taken first, before any write gives this transaction an ID of its own.
    hi     xid8 := pg_snapshot_xmin(pg_current_snapshot());
    lo     xid8;
    upto   xid8;
    cut    boolean := false;
    job_ids text[];
    entries bigint[];
    n       integer;
BEGIN
    IF p_limit < 1 THEN
        RAISE EXCEPTION 'derive: limit % must be above zero', p_limit USING ERRCODE = '22023';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('ledger_webhook_derive/' || current_schema())) THEN
        RETURN QUERY SELECT 0, false;
        RETURN;
    END IF;
    SELECT c.horizon INTO lo FROM webhook_derive_cursor c;
    -- A cursor beyond every transaction the cluster has begun can only be a copy's (a database
    -- restored from a logical dump starts its transaction IDs lower): every pass would read nothing
    -- until the new IDs caught up, in silence. Fail loudly instead; the operator resets the cursor.
    IF lo > pg_snapshot_xmax(pg_current_snapshot()) THEN
        RAISE EXCEPTION 'derive: the cursor (%) is ahead of every transaction this cluster has begun (%): the database was restored from a logical dump; reset the cursor (docs/operations.md, "Webhooks")',
            lo, pg_snapshot_xmax(pg_current_snapshot()) USING ERRCODE = '55000';
    END IF;
    IF hi <= lo THEN
        RETURN QUERY SELECT 0, false;
        RETURN;
    END IF;
    -- A batch: the window ends at the (p_limit+1)-th row's transaction of either source, and
    -- always takes at least the first transaction whole.
    SELECT least(
        (SELECT le.xid FROM ledger_entries le WHERE le.xid >= lo AND le.xid < hi ORDER BY le.xid OFFSET p_limit LIMIT 1),
        (SELECT j.outcome_xid FROM jobs j WHERE j.outcome_xid >= lo AND j.outcome_xid < hi ORDER BY j.outcome_xid OFFSET p_limit LIMIT 1))
    INTO upto;
    IF upto IS NOT NULL THEN
        IF upto = lo THEN
            upto := least(
                (SELECT min(le.xid) FROM ledger_entries le WHERE le.xid > lo AND le.xid < hi),
                (SELECT min(j.outcome_xid) FROM jobs j WHERE j.outcome_xid > lo AND j.outcome_xid < hi));
        END IF;
        IF upto IS NOT NULL THEN
            hi := upto;
            cut := true;
        END IF;
    END IF;
    SELECT coalesce(array_agg(DISTINCT le.job_id) FILTER (WHERE le.kind IN ('charge', 'refund', 'reclaim')), '{}'),
           -- The rows that may make an account's event: grants (credit.granted) and debits
           -- (balance.low; an expiry's credit.expired).
           coalesce(array_agg(le.id) FILTER (WHERE le.amount < 0 OR le.kind = 'grant'), '{}')
    INTO job_ids, entries
    FROM ledger_entries le
    WHERE le.xid >= lo AND le.xid < hi
      AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.account_id = le.account_id AND e.disabled_at IS NULL);
    job_ids := job_ids || ARRAY(
        SELECT j.id FROM jobs j
        WHERE j.outcome_xid >= lo AND j.outcome_xid < hi
          AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.account_id = j.account_id AND e.disabled_at IS NULL));
    UPDATE webhook_derive_cursor SET horizon = hi, derived_at = now();
    n := ledger_webhook_materialize(job_ids, entries, NULL, NULL);
    n := n + ledger_webhook_materialize_topups(entries, NULL, NULL);
    RETURN QUERY SELECT n, cut;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_webhook_derive(integer)") }}
