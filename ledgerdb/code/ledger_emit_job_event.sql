-- Writes the webhook event of a job's transition (ledger_emit_event) with the job's money figures
-- as they stand after it: what it holds, what it costs the account now, what its settlement gave
-- back, the customer's reason code (never an operator's detail) and the balance after the
-- transition's ledger row (NULL when it wrote none, as a rejection). Called by the money functions
-- inside their transaction, only on the path that applied the transition.
CREATE FUNCTION ledger_emit_job_event(p_type text, j jobs, p_balance_after bigint)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    charged  bigint;
    released bigint;
BEGIN
    -- A tombstone costs what the state it was deleted from (or recovered to) costs.
    charged := CASE coalesce(j.state_before_delete, j.state)
        WHEN 'running' THEN j.cost
        WHEN 'delivered' THEN CASE WHEN j.is_settled THEN j.units_used * j.unit_price ELSE j.cost END
        WHEN 'recovered' THEN CASE WHEN j.is_settled THEN j.units_used * j.unit_price ELSE j.cost END
        ELSE 0 END;
    released := CASE WHEN j.is_settled THEN (j.held_units - j.units_used) * j.unit_price ELSE 0 END;
    PERFORM ledger_emit_event(j.account_id, j.id, p_type, jsonb_build_object(
        'job_id', substr(j.id, char_length(j.account_id) + 2),
        'account_id', j.account_id,
        'state', j.state,
        'kind', j.kind,
        'price_version', j.price_version,
        'unit', j.unit,
        'unit_price', j.unit_price,
        'held_units', j.held_units,
        'held', j.cost,
        'units_used', j.units_used,
        'charged', charged,
        'released', released,
        -- The codes a customer reads (docs/design.md, "What a customer reads"): the two
        -- rejections that say how jobbill's workflows stood read "rejected".
        'reason', CASE
            WHEN j.state = 'rejected' AND j.reject_reason IN ('workflow_ended_before_charging', 'workflow_id_taken') THEN 'rejected'
            WHEN j.state = 'rejected' THEN j.reject_reason
            ELSE j.refund_reason_code END,
        'attempts', j.attempts,
        'balance_after', p_balance_after));
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_emit_job_event(text, jobs, bigint)") }}
