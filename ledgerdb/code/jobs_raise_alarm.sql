-- Records that the database refused one of a job's ledger steps for good, once per job and step.
CREATE FUNCTION ledger_raise_alarm(p_job_id text, p_step text, p_message text)
RETURNS text
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
BEGIN
    PERFORM 1 FROM jobs WHERE id = p_job_id;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    INSERT INTO ledger_alarms (job_id, step, message) VALUES (p_job_id, p_step, p_message)
    ON CONFLICT (job_id, step) DO NOTHING;
    IF FOUND THEN
        RETURN 'applied';
    END IF;
    RETURN 'already_applied';
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_raise_alarm(text, text, text)") }}
