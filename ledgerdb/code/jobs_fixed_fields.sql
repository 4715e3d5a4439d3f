-- The price-list rule: what a job costs, at which price, whose it is and what was asked are fixed
-- at submission; the units and the output it was settled at are fixed once settled, and the time
-- it was delivered once delivered; and a guard flag never goes back to false, nor a tombstone to
-- life.
CREATE OR REPLACE FUNCTION jobs_refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id <> OLD.id OR NEW.account_id <> OLD.account_id OR NEW.cost <> OLD.cost
        OR NEW.request_fingerprint <> OLD.request_fingerprint
        OR (NEW.kind, NEW.price_version, NEW.unit, NEW.unit_price, NEW.held_units)
           IS DISTINCT FROM (OLD.kind, OLD.price_version, OLD.unit, OLD.unit_price, OLD.held_units)
        OR (OLD.units_used IS NOT NULL AND NEW.units_used IS DISTINCT FROM OLD.units_used)
        OR (OLD.output_ref IS NOT NULL AND NEW.output_ref IS DISTINCT FROM OLD.output_ref) THEN
        RAISE EXCEPTION 'job %: id, account, price, cost and request are fixed at submission, and usage and output once settled', OLD.id
            USING ERRCODE = 'JB002';
    END IF;
    IF (OLD.is_charged AND NOT NEW.is_charged) OR (OLD.is_refunded AND NOT NEW.is_refunded)
        OR (OLD.is_reclaimed AND NOT NEW.is_reclaimed) OR (OLD.is_settled AND NOT NEW.is_settled)
        OR (OLD.state = 'deleted' AND NEW.state <> 'deleted')
        -- The transaction a job's rejection or delivery event is derived from stays what it was.
        OR (OLD.outcome_xid IS NOT NULL AND NEW.outcome_xid IS DISTINCT FROM OLD.outcome_xid)
        -- What the rejection, refund and delivery said, which their events are derived from; the
        -- delivery's time also dates the revenue of a delivery that wrote no row.
        OR (OLD.rejected_at IS NOT NULL AND NEW.rejected_at IS DISTINCT FROM OLD.rejected_at)
        OR (OLD.delivered_at IS NOT NULL AND NEW.delivered_at IS DISTINCT FROM OLD.delivered_at)
        OR (OLD.attempts_at_refund IS NOT NULL AND NEW.attempts_at_refund IS DISTINCT FROM OLD.attempts_at_refund)
        OR (OLD.balance_at_delivery IS NOT NULL AND NEW.balance_at_delivery IS DISTINCT FROM OLD.balance_at_delivery) THEN
        RAISE EXCEPTION 'job %: guard flags and tombstones never go back', OLD.id
            USING ERRCODE = 'JB002';
    END IF;
    RETURN NEW;
END
$$;
{{ template "nobody_may_call" (dict "fn" "jobs_refuse_rewrite()") }}
CREATE OR REPLACE TRIGGER jobs_fixed_fields
    BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_refuse_rewrite();
