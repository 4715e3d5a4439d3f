-- Writes the placeholder for a client job ID (state submitting, nothing charged) with the request
-- it was submitted with, at the kind's current price: the job records the price version, the
-- unit price and the units its charge will hold (the kind's maximum, or the smaller maximum the
-- client asked for), and its cost is their product — never a caller's number (the price-list rule).
-- The same ID with the same request answers the original job, at the price it was submitted at;
-- with another request (or a maximum of units that would hold other units), a conflict; once
-- deleted, gone.
CREATE FUNCTION ledger_submit(p_job_id text, p_account_id text, p_kind text, p_max_units bigint,
                              p_fingerprint bytea, p_request bytea)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    j     jobs;
    price prices;
    held  bigint;
BEGIN
    -- A retry of a submission answers the job as it was written, whatever the price list says now.
    SELECT * INTO j FROM jobs WHERE id = p_job_id;
    IF NOT FOUND THEN
        -- The account is checked first so that an unknown one is reported as such, not as an
        -- opaque foreign-key failure.
        PERFORM 1 FROM accounts WHERE id = p_account_id;
        IF NOT FOUND THEN
            RETURN ledger_job_result_of('unknown_account', NULL, NULL, NULL::jobs);
        END IF;
        SELECT * INTO price FROM prices WHERE kind = p_kind ORDER BY version DESC LIMIT 1;
        IF NOT FOUND THEN
            RETURN ledger_job_result_of('unknown_kind', NULL, NULL, NULL::jobs);
        END IF;
        held := coalesce(p_max_units, price.max_units);
        IF held < 1 OR held > price.max_units THEN
            RETURN ledger_job_result_of('units_above_max', NULL, NULL, NULL::jobs);
        END IF;
        -- ON CONFLICT waits for a concurrent insert of the same ID to commit or roll back, so
        -- exactly one submission of an ID writes the placeholder.
        INSERT INTO jobs (id, account_id, cost, request_fingerprint, kind, price_version, unit, unit_price, held_units)
        VALUES (p_job_id, p_account_id, price.unit_price * held, p_fingerprint,
                price.kind, price.version, price.unit, price.unit_price, held)
        ON CONFLICT (id) DO NOTHING
        RETURNING * INTO j;
        IF FOUND THEN
            INSERT INTO job_requests (job_id, request) VALUES (p_job_id, coalesce(p_request, ''::bytea));
            RETURN ledger_job_result_of('applied', NULL, NULL, j);
        END IF;
        SELECT * INTO j FROM jobs WHERE id = p_job_id;
    END IF;

    IF j.state = 'deleted' THEN
        RETURN ledger_job_result_of('gone', NULL, NULL, j);
    ELSIF j.request_fingerprint <> p_fingerprint
        OR (j.kind IS NOT NULL AND j.held_units <> coalesce(p_max_units,
                (SELECT max_units FROM prices WHERE kind = j.kind AND version = j.price_version))) THEN
        RETURN ledger_job_result_of('conflict', NULL, NULL, j);
    END IF;
    RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_submit(text, text, text, bigint, bytea, bytea)") }}
