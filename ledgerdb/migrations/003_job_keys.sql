-- Job IDs belong to their account. Two accounts may choose the same job ID, so a job's ID alone
-- no longer names it: the ledger keys a job by its account and its ID, written as one text,
-- "<account>/<job>" (neither may hold a "/"), the same text that follows "job/" in its
-- workflow ID. Every table that names a job (its request, its ledger rows, its reported results,
-- its alarms) holds that key, so the foreign keys and the UNIQUE guards (one charge per job …)
-- keep working unchanged, and no money function changes its shape.

-- The ledger's refusing triggers (installed by the code package after every migrate) forbid
-- rewriting these rows, and rightly: this is the one rewrite, of the key alone, in the
-- migration's own transaction. No amount, state or flag changes.
ALTER TABLE jobs DISABLE TRIGGER USER;
ALTER TABLE job_requests DISABLE TRIGGER USER;
ALTER TABLE ledger_entries DISABLE TRIGGER USER;
ALTER TABLE result_reports DISABLE TRIGGER USER;
ALTER TABLE ledger_alarms DISABLE TRIGGER USER;

ALTER TABLE job_requests DROP CONSTRAINT job_requests_job_id_fkey;
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_job_id_fkey;
ALTER TABLE result_reports DROP CONSTRAINT result_reports_job_id_fkey;
ALTER TABLE ledger_alarms DROP CONSTRAINT ledger_alarms_job_id_fkey;
ALTER TABLE jobs DROP CONSTRAINT jobs_id_format;

-- The rows that name a job first, while the jobs table still holds the old IDs to join on.
UPDATE job_requests r SET job_id = j.account_id || '/' || j.id FROM jobs j WHERE j.id = r.job_id;
UPDATE ledger_entries SET job_id = account_id || '/' || job_id WHERE job_id IS NOT NULL;
UPDATE result_reports r SET job_id = j.account_id || '/' || j.id FROM jobs j WHERE j.id = r.job_id;
UPDATE ledger_alarms a SET job_id = j.account_id || '/' || j.id FROM jobs j WHERE j.id = a.job_id;
UPDATE jobs SET id = account_id || '/' || id;

ALTER TABLE jobs
    -- The key is the account's ID, a "/", and the job's ID, each in the ID format of
    -- ledgerdb.ValidateID; the account part is the paying account's own.
    ADD CONSTRAINT jobs_id_is_key CHECK (
        id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}/[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'
        AND starts_with(id, account_id || '/'));

ALTER TABLE job_requests ADD CONSTRAINT job_requests_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id);
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id);
ALTER TABLE result_reports ADD CONSTRAINT result_reports_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id);
ALTER TABLE ledger_alarms ADD CONSTRAINT ledger_alarms_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id);

-- A job's ledger rows belong to the job's account: the key says which, and this holds them to it.
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_job_of_account CHECK (
    job_id IS NULL OR starts_with(job_id, account_id || '/'));

ALTER TABLE jobs ENABLE TRIGGER USER;
ALTER TABLE job_requests ENABLE TRIGGER USER;
ALTER TABLE ledger_entries ENABLE TRIGGER USER;
ALTER TABLE result_reports ENABLE TRIGGER USER;
ALTER TABLE ledger_alarms ENABLE TRIGGER USER;
