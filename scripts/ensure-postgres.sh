#!/usr/bin/env bash
# Makes a local PostgreSQL ready for jobbill: installs it where it is missing, starts the
# cluster when it is stopped, and creates the two roles and the two databases (the service's and
# the tests'). Every step checks before it acts, so running it twice changes nothing.
#
# The cluster is the machine's own (Debian's packaged PostgreSQL, the newest of pg_lsclusters),
# which this script uses whoever started it, and says which: its version, name and port. The URLs
# of the Makefile and the configuration's defaults name port 5432; a cluster on another port is
# reported, since they would reach another server there, or none. (The tests, when no URL is set,
# use none of this: they start a cluster of the checkout's own, internal/pgtest.)
#
# Two roles, for least privilege (ledgerdb/migrations/001_baseline.sql and ledgerdb/code/security.sql): the owner, which owns the
# databases and runs the migrations, and the service's role jobbill_app, which may only read the
# tables and call the ledger's functions. The app role's name is fixed because the migration
# grants to it by name.
#
# Environment (all optional):
#   JOBBILL_PG_USER      the owner role to create  (default jobbill)
#   JOBBILL_PG_PASSWORD  its password              (default jobbill)
#   JOBBILL_PG_APP_PASSWORD  jobbill_app's password (default jobbill_app)
#   JOBBILL_PG_DB        the service's database    (default jobbill)
#   JOBBILL_PG_TEST_DB   the tests' database       (default jobbill_test)
#   JOBBILL_PG_FRESH_TEST_DB=1  drop the tests' databases first, so the run starts from an empty
#                        ledger whatever another checkout migrated into it (CI sets this)
#
# Beside the tests' database, each test deployment gets one of its own, named after it
# (jobbill_test_worker, jobbill_test_chaos): tests that run whole `jobbill worker` processes, whose
# scheduled reconcile pass and webhook delivery serve every account of their database as in
# production, would otherwise heal and deliver other tests' jobs (ledgertest.Deployment).
set -euo pipefail

pg_user=${JOBBILL_PG_USER:-jobbill}
pg_password=${JOBBILL_PG_PASSWORD:-jobbill}
pg_db=${JOBBILL_PG_DB:-jobbill}
pg_test_db=${JOBBILL_PG_TEST_DB:-jobbill_test}
# The ledger benchmark's own database (BENCHMARKS.md), so that its runs neither grow the service's
# nor are measured on what every earlier run left there.
pg_bench_db=${JOBBILL_PG_BENCH_DB:-jobbill_bench}
pg_app_user=jobbill_app
pg_app_password=${JOBBILL_PG_APP_PASSWORD:-jobbill_app}
# The test deployments (ledgertest.Deployments): each has the database ${pg_test_db}_<name>.
test_deployments=(worker chaos)
test_dbs=("$pg_test_db")
for d in "${test_deployments[@]}"; do test_dbs+=("${pg_test_db}_$d"); done

say() { printf 'postgres: %s\n' "$*" >&2; }

as_postgres() {
	if [ "$(id -un)" = postgres ]; then "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
}

if ! command -v pg_lsclusters >/dev/null 2>&1; then
	say "PostgreSQL is not installed; installing it with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq postgresql postgresql-contrib >/dev/null
fi

# The newest installed cluster; Debian 12 ships 15/main.
read -r pg_version pg_cluster pg_port pg_status _ < <(pg_lsclusters --no-header | sort -k1,1n | tail -n 1)
if [ -z "${pg_version:-}" ]; then
	say "no cluster found; creating one"
	pg_version=$(ls /usr/lib/postgresql | sort -n | tail -n 1)
	pg_createcluster "$pg_version" main >/dev/null
	read -r pg_version pg_cluster pg_port pg_status _ < <(pg_lsclusters --no-header | sort -k1,1n | tail -n 1)
fi

case "$pg_status" in
online*)
	say "using the running cluster $pg_version/$pg_cluster on port $pg_port (the machine's PostgreSQL, pg_ctlcluster's)"
	;;
*)
	say "starting cluster $pg_version/$pg_cluster on port $pg_port"
	pg_ctlcluster "$pg_version" "$pg_cluster" start
	;;
esac
if [ "$pg_port" != 5432 ]; then
	say "cluster $pg_version/$pg_cluster listens on port $pg_port, not 5432, which the Makefile's test URLs and the" \
		"configuration's defaults name: set JOBBILL_TEST_DATABASE_URL, JOBBILL_TEST_MIGRATE_DATABASE_URL and the" \
		"configuration's database URLs to port $pg_port"
fi

wait_ready() {
	for _ in $(seq 1 60); do
		if as_postgres pg_isready -q -p "$pg_port"; then break; fi
		sleep 0.5
	done
	as_postgres pg_isready -q -p "$pg_port" || { say "cluster did not become ready"; exit 1; }
}
wait_ready

psql_admin() { as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$pg_port" -d postgres "$@"; }

# Connections: the default 100 is too few once cluster mode's Temporal server
# (scripts/ensure-temporal-cluster.sh) shares this Postgres with jobbill and the tests, whose test
# ledger alone pools up to 40 per test process. The setting takes a restart; the script restarts
# only a cluster nobody is connected to (a fresh machine's), and otherwise says how.
pg_max_connections=400
current_max=$(psql_admin -tAc "SHOW max_connections")
if [ "$current_max" -lt "$pg_max_connections" ]; then
	psql_admin -c "ALTER SYSTEM SET max_connections = $pg_max_connections"
	clients=$(psql_admin -tAc "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
	if [ "$clients" = 0 ]; then
		say "raising max_connections from $current_max to $pg_max_connections: restarting cluster $pg_version/$pg_cluster"
		pg_ctlcluster "$pg_version" "$pg_cluster" restart
		wait_ready
	else
		say "max_connections is $current_max; $pg_max_connections is set for the next restart, which this script" \
			"leaves to you while $clients clients are connected: pg_ctlcluster $pg_version $pg_cluster restart"
	fi
fi

# Identifiers and the password are passed as psql variables so that quoting is psql's job.
# Neither role gets SUPERUSER, CREATEROLE or CREATEDB: a superuser would bypass the grants of the
# app role's migration, and could switch the ledger's refusing triggers off.
ensure_role() {
	psql_admin -v role="$1" -v pw="$2" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'role', :'pw')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', :'role', :'pw') \gexec
SQL
}
ensure_role "$pg_user" "$pg_password"
ensure_role "$pg_app_user" "$pg_app_password"
# The schema's owner may take a checkpoint (PostgreSQL 15's pg_checkpoint, nothing more): the
# ledger benchmark starts each of its sides right after one.
psql_admin -v role="$pg_user" <<'SQL'
SELECT format('GRANT pg_checkpoint TO %I', :'role')
WHERE NOT pg_has_role(:'role', 'pg_checkpoint', 'member') \gexec
SQL

if [ "${JOBBILL_PG_FRESH_TEST_DB:-}" = 1 ]; then
	say "dropping ${test_dbs[*]} for a fresh start"
	for db in "${test_dbs[@]}"; do
		psql_admin -v db="$db" <<'SQL'
SELECT format('DROP DATABASE IF EXISTS %I WITH (FORCE)', :'db') \gexec
SQL
	done
fi

for db in "$pg_db" "$pg_bench_db" "${test_dbs[@]}"; do
	psql_admin -v db="$db" -v role="$pg_user" <<'SQL'
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL
done

say "ready: postgres://$pg_app_user:***@127.0.0.1:$pg_port/$pg_db for the service," \
	"postgres://$pg_user:***@127.0.0.1:$pg_port/$pg_db for migrations (tests: $pg_test_db)"
