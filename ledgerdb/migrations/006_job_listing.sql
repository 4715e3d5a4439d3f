-- An account's jobs are listed newest first by (created_at, id), a page at a time after a cursor
-- (GET /v1/jobs, ledgerdb.Store.ListJobs): this index answers each page by walking one account's
-- jobs backward from the cursor. IDs order bytewise (COLLATE "C") whatever the database's locale,
-- so a client sees the same order on every deployment. It covers the index it replaces.
CREATE INDEX jobs_account_id_created_at_id ON jobs (account_id, created_at, id COLLATE "C");
DROP INDEX jobs_account_id_created_at;
