#!/usr/bin/env bash
# Cluster mode: the real Temporal server on the local PostgreSQL, run as a process (no Docker), the
# way docker-compose.yml's `temporal` service runs it — same server version, same persistence,
# same shard count and dynamic config. It runs on its own ports, beside the dev server of
# scripts/ensure-temporal.sh on 7233/8233.
#
#   scripts/ensure-temporal-cluster.sh         install, prepare the databases, start, register
#   scripts/ensure-temporal-cluster.sh stop    stop the server (SIGTERM, then SIGKILL after 30 s)
#
# When a server already answers on the port, only step 4 runs. Otherwise, each step checking
# before it acts:
#   1. installs the server and its schema tool with `go install` at $server_version into .dev/bin
#      (the server took 7 min 24 s to build on 2 cores the first time, downloads included);
#   2. creates the role temporal and the databases temporal and temporal_visibility it owns
#      (PostgreSQL must be up: `make db`), and brings both schemas to this version with the tool,
#      as the compose file's temporal-schema service does;
#   3. writes .dev/cluster/config.yaml from scripts/cluster/config-template.yaml and starts the
#      server in the background (log .dev/cluster/server.log, pid .dev/cluster/server.pid), then
#      waits until it is healthy;
#   4. creates the namespaces and registers jobbill's search attributes in each.
#
# Environment (all optional):
#   JOBBILL_CLUSTER_PORT       frontend gRPC port   (default 7333); the other services' ports
#                              follow from it (see the ports below)
#   JOBBILL_CLUSTER_LOG_LEVEL  server log level     (default info)
#   JOBBILL_PG_PORT            PostgreSQL's port    (default: the newest local cluster's)
#   JOBBILL_CLUSTER_DATABASE   the server's database (default temporal); its visibility database
#                              is the same name with _visibility. With another port, a second
#                              server of its own beside the first (a server's membership lives in
#                              its database: two servers on one database are one cluster).
#   JOBBILL_CLUSTER_MAX_CONNS  Postgres connections per service and store (default 8; visibility
#                              half): the server's four services hold up to 6 × this in all, on
#                              the Postgres jobbill and its tests share (max_connections 100)
set -euo pipefail

cd "$(dirname "$0")/.."

# The release of docker-compose.yml's temporalio/server and temporalio/admin-tools images
# (cluster_test.go, at the repository's root, keeps them equal).
server_version=v1.32.0
cli_version=v1.5.1

# The namespaces to create, and the search attributes to register in each (name=type). The list
# must equal workflows.SearchAttributes() in workflows/names.go; the root's cluster_test.go
# checks it.
namespaces=(jobbill jobbill-test)
namespace_retention=72h
search_attributes=(BillingState=Keyword AccountID=Keyword DeadLettered=Bool)

# Ports, all on 127.0.0.1: Temporal's default layout (7233 frontend, 7234 history, 7235 matching,
# 7239 worker, 7243 frontend HTTP, 69xx membership) moved by the frontend's offset from 7233.
port=${JOBBILL_CLUSTER_PORT:-7333}
offset=$((port - 7233))
history_port=$((7234 + offset))
matching_port=$((7235 + offset))
worker_port=$((7239 + offset))
http_port=$((7243 + offset))
membership_base=$((6933 + offset))
log_level=${JOBBILL_CLUSTER_LOG_LEVEL:-info}
database=${JOBBILL_CLUSTER_DATABASE:-temporal}
visibility_database=${database}_visibility
max_conns=${JOBBILL_CLUSTER_MAX_CONNS:-8}
[[ $max_conns =~ ^[1-9][0-9]*$ ]] ||
	{ echo "JOBBILL_CLUSTER_MAX_CONNS must be a positive number, not '$max_conns'" >&2; exit 2; }
visibility_max_conns=$(((max_conns + 1) / 2))
[[ $database =~ ^[a-z][a-z0-9_]*$ ]] ||
	{ echo "JOBBILL_CLUSTER_DATABASE must be a lower-case SQL name, not '$database'" >&2; exit 2; }

bin_dir=$PWD/.dev/bin
server_bin=$bin_dir/server
sql_bin=$bin_dir/sql
cluster_dir=$PWD/.dev/cluster
config_file=$cluster_dir/config.yaml
log_file=$cluster_dir/server.log
schema_log=$cluster_dir/schema.log
pid_file=$cluster_dir/server.pid
register_error=$cluster_dir/register.err
template=$PWD/scripts/cluster/config-template.yaml
dynamic_config=$PWD/scripts/cluster/dynamicconfig.yaml

say() { printf 'temporal-cluster: %s\n' "$*" >&2; }

# running_pid prints the pid of the server this script started, if it is still running. A stale
# pid file's number may belong to another process by now: its command line must name our config.
running_pid() {
	local pid
	[ -f "$pid_file" ] || return 1
	pid=$(cat "$pid_file")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--config-file $config_file" || return 1
	echo "$pid"
}

stop_server() {
	local pid
	if ! pid=$(running_pid); then
		say "not running (no live server from $pid_file)"
		rm -f "$pid_file"
		return 0
	fi
	say "stopping the server (pid $pid) with SIGTERM"
	kill -TERM "$pid"
	for _ in $(seq 1 60); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	if kill -0 "$pid" 2>/dev/null; then
		say "still running after 30 s; sending SIGKILL"
		kill -KILL "$pid"
	fi
	rm -f "$pid_file"
	say "stopped"
}

case "${1:-start}" in
start) ;;
stop)
	stop_server
	exit 0
	;;
*)
	echo "usage: $0 [start|stop]" >&2
	exit 2
	;;
esac

mkdir -p "$bin_dir" "$cluster_dir"

temporal_bin=$(command -v temporal || true)
if [ -z "$temporal_bin" ]; then
	temporal_bin="$(go env GOPATH)/bin/temporal"
fi
if [ ! -x "$temporal_bin" ]; then
	say "installing the Temporal CLI $cli_version with go install (a few minutes the first time)"
	GOFLAGS= go install "github.com/temporalio/cli/cmd/temporal@$cli_version"
fi

healthy() { "$temporal_bin" operator cluster health --address "127.0.0.1:$port" >/dev/null 2>&1; }

# --- 1. The binaries --------------------------------------------------------------------------

# installed_version prints the go.temporal.io/server version a binary was built from, if any.
installed_version() {
	[ -x "$1" ] || return 0
	go version -m "$1" 2>/dev/null | awk '$1 == "mod" && $2 == "go.temporal.io/server" { print $3 }'
}

# GOTOOLCHAIN=local: build with this machine's Go; a newer patch release of the server may ask for
# a newer toolchain than is installed. `go install pkg@version` leaves go.mod alone.
install_tool() {
	local bin=$1 pkg=$2 note=$3 started
	if [ "$(installed_version "$bin")" = "$server_version" ]; then return 0; fi
	say "installing $pkg@$server_version into $bin_dir$note"
	started=$(date +%s)
	GOTOOLCHAIN=local GOFLAGS= GOBIN="$bin_dir" go install "$pkg@$server_version"
	say "installed $(basename "$bin") in $(($(date +%s) - started)) s"
}

install_binaries() {
	install_tool "$server_bin" go.temporal.io/server/cmd/server " (about 7.5 minutes on 2 cores the first time)"
	install_tool "$sql_bin" go.temporal.io/server/cmd/tools/sql ""
}

# --- 2. The databases and their schemas -------------------------------------------------------

as_postgres() {
	if [ "$(id -un)" = postgres ]; then "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
}

pg_port=${JOBBILL_PG_PORT:-}
if [ -z "$pg_port" ]; then
	read -r _ _ pg_port _ < <(pg_lsclusters --no-header | sort -k1,1n | tail -n 1)
fi

psql_on() {
	local db=$1
	shift
	as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$pg_port" -d "$db" "$@"
}

# The role is neither superuser nor allowed to create roles or databases: the databases are made
# here, owned by it, and the schema needs no more than an owner's rights. jobbill's own roles and
# databases are not touched.
ensure_databases() {
	as_postgres pg_isready -q -p "$pg_port" ||
		{ say "PostgreSQL does not answer on port $pg_port; start it with make db (scripts/ensure-postgres.sh)"; exit 1; }
	psql_on postgres <<'SQL'
SELECT 'CREATE ROLE temporal LOGIN PASSWORD ''temporal'''
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'temporal') \gexec
ALTER ROLE temporal LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD 'temporal';
SQL
	for db in "$database" "$visibility_database"; do
		psql_on postgres -v db="$db" <<'SQL'
SELECT format('CREATE DATABASE %I OWNER temporal', :'db')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL
	done
	# Visibility's schema asks for btree_gin; create it as the superuser rather than rely on the
	# extension being trusted.
	psql_on "$visibility_database" <<'SQL'
SELECT 'CREATE EXTENSION btree_gin'
WHERE NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'btree_gin') \gexec
SQL
}

# The tool logs every statement; its output goes to a file, shown when it fails.
sql_tool() {
	"$sql_bin" --plugin postgres12 --endpoint 127.0.0.1 --port "$pg_port" \
		--user temporal --password temporal "$@" >>"$schema_log" 2>&1 ||
		{ say "the schema tool failed; see $schema_log"; tail -n 20 "$schema_log" >&2; return 1; }
}

# The sequence of docker-compose.yml's temporal-schema service: setup-schema -v 0.0 once on an
# empty database, then update-schema to this version (which does nothing when already there).
# Compose runs setup-schema whenever update-schema fails; here the schema_version table is looked
# at instead, so that an update failing for another reason stops the script rather than resetting
# the recorded version.
ensure_schemas() {
	local schema_root db dir versioned set_up
	schema_root=$(go env GOMODCACHE)/go.temporal.io/server@$server_version/schema/postgresql/v12
	if [ ! -d "$schema_root" ]; then
		say "downloading go.temporal.io/server@$server_version for its schema files"
		# Outside the repository, so that jobbill's go.mod and go.sum stay as they are.
		(cd / && GOFLAGS= go mod download "go.temporal.io/server@$server_version")
	fi
	for db in "$database" "$visibility_database"; do
		if [ "$db" = "$database" ]; then dir=temporal; else dir=visibility; fi
		versioned=$schema_root/$dir/versioned
		# An assignment, so that a failing query stops the script instead of reading as "no schema".
		set_up=$(psql_on "$db" -tAc "SELECT to_regclass('public.schema_version') IS NOT NULL")
		if [ "$set_up" != t ]; then
			say "setting up the schema of $db"
			sql_tool --database "$db" setup-schema -v 0.0
		fi
		say "updating the schema of $db to $server_version (log $schema_log)"
		sql_tool --database "$db" update-schema -d "$versioned"
	done
}

# --- 3. The server ----------------------------------------------------------------------------

render_config() {
	sed -e "s|\${LOG_LEVEL}|$log_level|g" \
		-e "s|\${PG_PORT}|$pg_port|g" \
		-e "s|\${FRONTEND_GRPC_PORT}|$port|g" \
		-e "s|\${FRONTEND_HTTP_PORT}|$http_port|g" \
		-e "s|\${FRONTEND_MEMBERSHIP_PORT}|$membership_base|g" \
		-e "s|\${HISTORY_GRPC_PORT}|$history_port|g" \
		-e "s|\${HISTORY_MEMBERSHIP_PORT}|$((membership_base + 1))|g" \
		-e "s|\${MATCHING_GRPC_PORT}|$matching_port|g" \
		-e "s|\${MATCHING_MEMBERSHIP_PORT}|$((membership_base + 2))|g" \
		-e "s|\${WORKER_GRPC_PORT}|$worker_port|g" \
		-e "s|\${WORKER_MEMBERSHIP_PORT}|$((membership_base + 6))|g" \
		-e "s|\${DYNAMIC_CONFIG_FILE}|$dynamic_config|g" \
		-e "s|\${DATABASE}|$database|g" \
		-e "s|\${MAX_CONNS}|$max_conns|g" \
		-e "s|\${VISIBILITY_MAX_CONNS}|$visibility_max_conns|g" \
		-e "s|\${VISIBILITY_DATABASE}|$visibility_database|g" \
		"$template"
}

write_config() {
	local rendered
	rendered=$(render_config)
	if grep -v '^[[:space:]]*#' <<<"$rendered" | grep -q '\${'; then
		say "$template has a placeholder this script does not fill:"
		grep -v '^[[:space:]]*#' <<<"$rendered" | grep '\${' >&2
		exit 1
	fi
	if [ "$rendered" != "$(cat "$config_file" 2>/dev/null)" ]; then
		say "writing $config_file"
		printf '%s\n' "$rendered" >"$config_file"
	fi
}

start_server() {
	local pid
	if pid=$(running_pid); then
		say "server (pid $pid) is running but not answering yet; waiting"
	else
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			say "something else listens on 127.0.0.1:$port; set JOBBILL_CLUSTER_PORT to another port"
			exit 1
		fi
		say "starting the server on 127.0.0.1:$port (history $history_port, matching $matching_port," \
			"worker $worker_port, HTTP $http_port, membership $membership_base-$((membership_base + 6)))," \
			"log $log_file"
		# setsid detaches it from this shell so it outlives the script (and make). No authorizer:
		# a development cluster, like the compose file's.
		setsid "$server_bin" --config-file "$config_file" --allow-no-auth start >>"$log_file" 2>&1 </dev/null &
		echo $! >"$pid_file"
	fi
	for _ in $(seq 1 240); do
		if healthy; then break; fi
		if ! running_pid >/dev/null; then
			say "the server exited; see $log_file"
			tail -n 20 "$log_file" >&2
			exit 1
		fi
		sleep 0.5
	done
	healthy || { say "server did not become healthy in 2 minutes; see $log_file"; tail -n 20 "$log_file" >&2; exit 1; }
	say "server healthy"
}

# Called from if/else, not from `a || b`, so that set -e still stops at a failing step.
if healthy; then
	say "server already answering on 127.0.0.1:$port; checking its namespaces and search attributes only"
else
	install_binaries
	ensure_databases
	ensure_schemas
	write_config
	start_server
fi

# --- 4. Namespaces and search attributes ------------------------------------------------------

operator() { "$temporal_bin" operator "$@" --address "127.0.0.1:$port"; }

# retry runs a command until it succeeds, for up to a minute: a namespace just created takes a few
# seconds to reach every service of the server.
retry() {
	local n=0
	until "$@"; do
		n=$((n + 1))
		[ $n -lt 60 ] || return 1
		sleep 1
	done
}

registered() { operator search-attribute list --namespace "$1" 2>/dev/null | grep -qw "$2"; }
# The last attempt's error is kept, to be shown if every attempt fails.
register() {
	registered "$1" "$2" ||
		operator search-attribute create --namespace "$1" --name "$2" --type "$3" >/dev/null 2>"$register_error"
}

for ns in "${namespaces[@]}"; do
	if operator namespace describe --namespace "$ns" >/dev/null 2>&1; then
		say "namespace $ns exists"
	else
		say "creating namespace $ns (retention $namespace_retention)"
		operator namespace create --namespace "$ns" --retention "$namespace_retention" >/dev/null
	fi
	for sa in "${search_attributes[@]}"; do
		name=${sa%%=*} type=${sa#*=}
		if registered "$ns" "$name"; then continue; fi
		say "registering search attribute $name ($type) in $ns"
		retry register "$ns" "$name" "$type" ||
			{ say "could not register $name in $ns: $(cat "$register_error")"; exit 1; }
	done
done

say "ready: 127.0.0.1:$port, namespaces ${namespaces[*]}; point jobbill at it with" \
	"JOBBILL_TEMPORAL_ADDRESS=127.0.0.1:$port JOBBILL_TEMPORAL_NAMESPACE=jobbill"
