-- The webhook events a job's committed rows make, in the order the job passed through them
-- (rank): job.charged from its charge row, or job.rejected from its rejection (outcome_xid, no
-- ledger row); then job.refunded from its refund row; then job.delivered from its delivery
-- (outcome_xid: a delivery writes a ledger row only when a release is due), or job.reclaimed from
-- its reclaim row. Each with its source's transaction (src_xid; NULL for what the old outbox wrote
-- already), its time, and the job's money figures as they stood right after that transition —
-- built from what the transition fixed (cost, price, units used, reasons), never from the job's
-- state now, so that an event derived late says what an event written at once would have said.
--
-- A rejection's time and a refund's attempts are the ones its UPDATE kept (rejected_at,
-- attempts_at_refund), not updated_at and attempts, which a delete and a redrive move later.
--
-- balance_after is the balance the transition's own rows left: after a reclaim, the release
-- written with it; a delivery with no release row, the balance the delivering transaction read
-- (balance_at_delivery; for a delivery from before that column, the account's last row by the
-- delivery's time); a rejection moves no money (NULL).
CREATE FUNCTION ledger_webhook_job_events(j jobs)
RETURNS TABLE (type text, rank integer, src_xid xid8, at timestamptz, payload jsonb)
LANGUAGE sql STABLE AS $$
    WITH own AS (
        SELECT le.kind, le.xid, le.created_at, le.balance_after FROM ledger_entries le WHERE le.job_id = j.id
    ), transitions AS (
        SELECT 'job.charged' AS type, 1 AS rank, c.xid, c.created_at AS at, c.balance_after FROM own c WHERE c.kind = 'charge'
        UNION ALL
        SELECT 'job.rejected', 1, j.outcome_xid, coalesce(j.rejected_at, j.updated_at), NULL WHERE j.reject_reason IS NOT NULL AND j.outcome_xid IS NOT NULL
        UNION ALL
        SELECT 'job.refunded', 2, r.xid, r.created_at, r.balance_after FROM own r WHERE r.kind = 'refund'
        UNION ALL
        SELECT 'job.delivered', 3, j.outcome_xid, j.delivered_at, coalesce(
                   (SELECT rel.balance_after FROM own rel WHERE rel.kind = 'release'),
                   j.balance_at_delivery,
                   (SELECT le.balance_after FROM ledger_entries le
                    WHERE le.account_id = j.account_id AND le.created_at <= j.delivered_at ORDER BY le.id DESC LIMIT 1))
        WHERE j.reject_reason IS NULL AND j.outcome_xid IS NOT NULL
        UNION ALL
        SELECT 'job.reclaimed', 3, rc.xid, rc.created_at,
               coalesce((SELECT rel.balance_after FROM own rel WHERE rel.kind = 'release'), rc.balance_after)
        FROM own rc WHERE rc.kind = 'reclaim'
    )
    SELECT t.type, t.rank, t.xid, t.at, jsonb_build_object(
        'job_id', substr(j.id, char_length(j.account_id) + 2),
        'account_id', j.account_id,
        'state', CASE t.type
            WHEN 'job.charged' THEN 'running'
            WHEN 'job.rejected' THEN 'rejected'
            WHEN 'job.refunded' THEN 'refunded'
            WHEN 'job.delivered' THEN 'delivered'
            -- A tombstone reclaimed stays a tombstone (ledger_recover).
            ELSE CASE WHEN j.deleted_at <= j.reclaimed_at THEN 'deleted' ELSE 'recovered' END END,
        'kind', j.kind,
        'price_version', j.price_version,
        'unit', j.unit,
        'unit_price', j.unit_price,
        'held_units', j.held_units,
        'held', j.cost,
        'units_used', CASE WHEN t.type IN ('job.delivered', 'job.reclaimed') THEN j.units_used END,
        -- What the job costs the account after the transition; a settled job its units used.
        'charged', CASE
            WHEN t.type = 'job.charged' THEN j.cost
            WHEN t.type IN ('job.delivered', 'job.reclaimed') THEN
                CASE WHEN j.is_settled THEN j.units_used * j.unit_price ELSE j.cost END
            ELSE 0 END,
        'released', CASE WHEN t.type IN ('job.delivered', 'job.reclaimed') AND j.is_settled
            THEN (j.held_units - j.units_used) * j.unit_price ELSE 0 END,
        -- The codes a customer reads (docs/design.md, "What a customer reads"): the two
        -- rejections that say how jobbill's workflows stood read "rejected".
        'reason', CASE
            WHEN t.type = 'job.rejected' AND j.reject_reason IN ('workflow_ended_before_charging', 'workflow_id_taken') THEN 'rejected'
            WHEN t.type = 'job.rejected' THEN j.reject_reason
            WHEN t.type IN ('job.refunded', 'job.reclaimed') THEN j.refund_reason_code END,
        -- A charge comes before any attempt; the later transitions record the attempts made.
        -- A refund's count is the one it recorded: a redrive's attempts come after it.
        'attempts', CASE WHEN t.type = 'job.charged' THEN 0
                         WHEN t.type = 'job.refunded' THEN coalesce(j.attempts_at_refund, j.attempts)
                         ELSE j.attempts END,
        'balance_after', t.balance_after)
    FROM transitions t
    ORDER BY t.rank;
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_webhook_job_events(jobs)") }}
