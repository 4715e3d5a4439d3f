#!/bin/sh
# docker-compose.yml mounts this into the ledger's postgres service as
# /docker-entrypoint-initdb.d/10-app-role.sh. The image runs it once, when it initialises an empty
# data directory, as POSTGRES_USER (the schema's owner, jobbill): it creates jobbill_app, the
# role the worker and the API connect as, which the ledger's schema grants to by name
# (ledgerdb/migrations/001_baseline.sql). scripts/ensure-postgres.sh does the same on a machine.
#
# The image runs it, or sources it when the execute bit is lost on the way (a checkout on
# Windows), so it sets no shell options of its own: ON_ERROR_STOP and the exit status of psql stop
# the initialisation on failure.
psql -X -q -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
	-v pw="${LEDGER_APP_PASSWORD:?set LEDGER_APP_PASSWORD on the postgres service}" <<'SQL'
SELECT format('CREATE ROLE jobbill_app LOGIN PASSWORD %L', :'pw')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'jobbill_app') \gexec
SQL
