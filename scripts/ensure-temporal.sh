#!/usr/bin/env bash
# Makes a local Temporal dev server ready for jobbill: installs the official CLI (v1.5.1, the last
# version that `go install` can build) when it is missing, and starts `temporal server start-dev`
# in the background when nothing answers on its port, with jobbill's namespaces and search
# attributes, a persistent database file and the Web UI. Running it again while the server is up
# only adds what is missing.
#
# Two namespaces: jobbill (what `make run` and a deployment use, workflows.DefaultNamespace) and
# jobbill-test (the tests', workertest.DefaultNamespace), so that the tests never touch the
# namespace a newcomer opens the Web UI on, nor its reconcile schedule.
#
# It never adopts a server it did not start without saying so: the server it starts is recorded
# in .dev/temporal.pid, and when something else answers on the port — another checkout's dev
# server, another program — it says what, and stops, unless told to use it (JOBBILL_TEMPORAL_ADOPT=1).
#
# Environment (all optional):
#   JOBBILL_TEMPORAL_PORT     gRPC port            (default 7233)
#   JOBBILL_TEMPORAL_UI_PORT  Web UI port          (default 8233)
#   JOBBILL_TEMPORAL_DB       persistent store     (default .dev/temporal.db in the repository)
#   JOBBILL_TEMPORAL_LOG      server log           (default .dev/temporal.log)
#   JOBBILL_TEMPORAL_ADOPT=1  use a server this script did not start that answers on the port,
#                             making jobbill's namespaces and search attributes on it
set -euo pipefail

cd "$(dirname "$0")/.."
port=${JOBBILL_TEMPORAL_PORT:-7233}
ui_port=${JOBBILL_TEMPORAL_UI_PORT:-8233}
mkdir -p .dev
db_file=${JOBBILL_TEMPORAL_DB:-$PWD/.dev/temporal.db}
log_file=${JOBBILL_TEMPORAL_LOG:-$PWD/.dev/temporal.log}
pid_file=$PWD/.dev/temporal.pid
cli_version=v1.5.1

# The namespaces (workflows.DefaultNamespace, workertest.DefaultNamespace) and the search attributes
# the workflows upsert (workflows.SearchAttributes): name=type. The root's cluster_test.go keeps them equal.
namespaces=(jobbill jobbill-test)
search_attributes=(BillingState=Keyword AccountID=Keyword DeadLettered=Bool)

say() { printf 'temporal: %s\n' "$*" >&2; }

temporal_bin=$(command -v temporal || true)
if [ -z "$temporal_bin" ]; then
	temporal_bin="$(go env GOPATH)/bin/temporal"
fi
if [ ! -x "$temporal_bin" ]; then
	say "installing the Temporal CLI $cli_version with go install (a few minutes the first time)"
	GOFLAGS= go install "github.com/temporalio/cli/cmd/temporal@$cli_version"
fi

healthy() { "$temporal_bin" operator cluster health --address "127.0.0.1:$port" >/dev/null 2>&1; }

# The command line of process $1, one line.
cmdline() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null; }
# ours: the process recorded in .dev/temporal.pid runs, and is the dev server this script starts
# (this port, this store).
ours() {
	local pid
	pid=$(cat "$pid_file" 2>/dev/null || true)
	[ -n "$pid" ] && cmdline "$pid" | grep -qF -- "start-dev --ip 127.0.0.1 --port $port " &&
		cmdline "$pid" | grep -qF -- "--db-filename $db_file "
}
# What listens on the port: its process ID, command line and working directory, when the system
# shows them.
listener() {
	local pid
	pid=$(ss -ltnpH "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2 || true)
	if [ -n "$pid" ]; then
		printf 'pid %s, %s(working directory %s)' "$pid" "$(cmdline "$pid")" "$(readlink "/proc/$pid/cwd" 2>/dev/null || echo unknown)"
	else
		printf 'a process the system does not show'
	fi
}

if ours && healthy; then
	say "dev server already running on 127.0.0.1:$port (pid $(cat "$pid_file"), started by this script)"
elif healthy || ss -ltnH "sport = :$port" 2>/dev/null | grep -q .; then
	if [ "${JOBBILL_TEMPORAL_ADOPT:-}" != 1 ]; then
		say "something this checkout did not start answers on 127.0.0.1:$port: $(listener)"
		say "set JOBBILL_TEMPORAL_ADOPT=1 to use it (jobbill's namespaces and search attributes are then made on it)," \
			"or JOBBILL_TEMPORAL_PORT (and JOBBILL_TEMPORAL_UI_PORT) to start this checkout's own on free ports"
		exit 1
	fi
	healthy || { say "what answers on 127.0.0.1:$port is no healthy Temporal server: $(listener)"; exit 1; }
	say "using a Temporal server this checkout did not start (JOBBILL_TEMPORAL_ADOPT=1), on 127.0.0.1:$port: $(listener)"
else
	args=(server start-dev --ip 127.0.0.1 --port "$port" --ui-port "$ui_port"
		--db-filename "$db_file" --log-level warn)
	for ns in "${namespaces[@]}"; do args+=(--namespace "$ns"); done
	for sa in "${search_attributes[@]}"; do args+=(--search-attribute "$sa"); done
	say "starting the dev server on 127.0.0.1:$port (UI http://127.0.0.1:$ui_port, store $db_file)"
	# setsid detaches it from this shell so it outlives the script (and make).
	setsid "$temporal_bin" "${args[@]}" >>"$log_file" 2>&1 < /dev/null &
	echo $! > "$pid_file"
	for _ in $(seq 1 120); do
		if healthy; then break; fi
		sleep 0.5
	done
	healthy || { say "dev server did not become healthy; see $log_file"; tail -n 20 "$log_file" >&2; exit 1; }
fi

# A server started earlier with an older list may lack a namespace or an attribute; both steps
# are idempotent.
for ns in "${namespaces[@]}"; do
	if ! "$temporal_bin" operator namespace describe --address "127.0.0.1:$port" --namespace "$ns" >/dev/null 2>&1; then
		say "creating namespace $ns"
		"$temporal_bin" operator namespace create --address "127.0.0.1:$port" --namespace "$ns" >/dev/null
	fi
	# A new namespace reaches every service of the server within seconds (their namespace cache).
	registered=
	for _ in $(seq 1 60); do
		if registered=$("$temporal_bin" operator search-attribute list --address "127.0.0.1:$port" --namespace "$ns" 2>/dev/null); then
			break
		fi
		sleep 0.5
	done
	for sa in "${search_attributes[@]}"; do
		name=${sa%%=*} type=${sa#*=}
		if ! grep -qw "$name" <<<"$registered"; then
			"$temporal_bin" operator search-attribute create --address "127.0.0.1:$port" --namespace "$ns" \
				--name "$name" --type "$type" >/dev/null
		fi
	done
done
say "ready: 127.0.0.1:$port, namespaces ${namespaces[*]}, UI http://127.0.0.1:$ui_port/namespaces/${namespaces[0]}/workflows"
