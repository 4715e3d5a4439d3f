-- Writes the placeholder for a client job ID (state submitting, nothing charged) with the request
-- it was submitted with. The same ID with the same request answers the original job; with another
-- request, a conflict; once deleted, gone.
CREATE FUNCTION ledger_submit(p_job_id text, p_account_id text, p_cost bigint, p_fingerprint bytea, p_request bytea)
RETURNS ledger_job_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    j jobs;
BEGIN
    -- The account is checked first so that an unknown one is reported as such, not as an
    -- opaque foreign-key failure.
    PERFORM 1 FROM accounts WHERE id = p_account_id;
    IF NOT FOUND THEN
        SELECT * INTO j FROM jobs WHERE id = p_job_id;
        IF NOT FOUND THEN
            RETURN ledger_job_result_of('unknown_account', NULL, NULL, NULL::jobs);
        END IF;
    ELSE
        -- ON CONFLICT waits for a concurrent insert of the same ID to commit or roll back, so
        -- exactly one submission of an ID writes the placeholder.
        INSERT INTO jobs (id, account_id, cost, request_fingerprint)
        VALUES (p_job_id, p_account_id, p_cost, p_fingerprint)
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
    ELSIF j.request_fingerprint <> p_fingerprint THEN
        RETURN ledger_job_result_of('conflict', NULL, NULL, j);
    END IF;
    RETURN ledger_job_result_of('already_applied', NULL, NULL, j);
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_submit(text, text, bigint, bytea, bytea)") }}
