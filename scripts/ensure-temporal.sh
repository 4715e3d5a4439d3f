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
# Environment (all optional):
#   JOBBILL_TEMPORAL_PORT     gRPC port            (default 7233)
#   JOBBILL_TEMPORAL_UI_PORT  Web UI port          (default 8233)
#   JOBBILL_TEMPORAL_DB       persistent store     (default .dev/temporal.db in the repository)
#   JOBBILL_TEMPORAL_LOG      server log           (default .dev/temporal.log)
set -euo pipefail

cd "$(dirname "$0")/.."
port=${JOBBILL_TEMPORAL_PORT:-7233}
ui_port=${JOBBILL_TEMPORAL_UI_PORT:-8233}
mkdir -p .dev
db_file=${JOBBILL_TEMPORAL_DB:-$PWD/.dev/temporal.db}
log_file=${JOBBILL_TEMPORAL_LOG:-$PWD/.dev/temporal.log}
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

if healthy; then
	say "dev server already answering on 127.0.0.1:$port"
else
	args=(server start-dev --ip 127.0.0.1 --port "$port" --ui-port "$ui_port"
		--db-filename "$db_file" --log-level warn)
	for ns in "${namespaces[@]}"; do args+=(--namespace "$ns"); done
	for sa in "${search_attributes[@]}"; do args+=(--search-attribute "$sa"); done
	say "starting the dev server on 127.0.0.1:$port (UI http://127.0.0.1:$ui_port, store $db_file)"
	# setsid detaches it from this shell so it outlives the script (and make).
	setsid "$temporal_bin" "${args[@]}" >>"$log_file" 2>&1 < /dev/null &
	echo $! > .dev/temporal.pid
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
