#!/usr/bin/env bash
# The services the tests start for this checkout when no URL names one (docs/development.md,
# "Services and settings"): a throwaway Postgres cluster in .dev/pgtest (internal/pgtest, started
# by ledgerdb/ledgertest) and a Temporal dev server in .dev/temporal-test (devserver.Ensure, started
# by worker/workertest). The tests leave both running for the next run; this script shows, stops or
# removes them. It touches nothing else: a process is stopped only when it runs from these
# directories.
#
#   scripts/test-services.sh status   say what runs
#   scripts/test-services.sh stop     stop both; their data stays, and the next test run starts them again
#   scripts/test-services.sh clean    stop both and remove their data; the next test run makes them anew
#
# Environment: JOBBILL_TEST_SERVICES_DIR, where the tests keep them (default .dev), as the tests read it.
set -euo pipefail

cd "$(dirname "$0")/.."
dir=${JOBBILL_TEST_SERVICES_DIR:-$PWD/.dev}
pg=$dir/pgtest
tp=$dir/temporal-test

say() { printf 'test services: %s\n' "$*" >&2; }

# The cluster's data directory (.dev/pgtest, or where it links to when root's postgres user could
# not reach the checkout), its owner, and the pg_ctl of its PostgreSQL version.
pg_data() { readlink -f "$pg"; }
pg_ctl_of() {
	local version bin
	version=$(cat "$1/PG_VERSION")
	for bin in "/usr/lib/postgresql/$version/bin/pg_ctl" "$(command -v pg_ctl || true)"; do
		if [ -n "$bin" ] && [ -x "$bin" ]; then echo "$bin"; return; fi
	done
	say "no pg_ctl of PostgreSQL $version"
	exit 1
}
# Runs a command as the owner of the data directory (pg_ctl refuses root, as the server does).
as_owner() {
	local owner
	owner=$(stat -c %U "$1")
	shift
	if [ "$(id -un)" = "$owner" ]; then "$@"; else su "$owner" -s /bin/sh -c "$(printf '%q ' "$@")"; fi
}

pg_status() {
	local data
	data=$(pg_data)
	if [ ! -f "$data/PG_VERSION" ]; then
		say "Postgres: none in $pg"
	elif [ -f "$data/postmaster.pid" ] && as_owner "$data" "$(pg_ctl_of "$data")" status -D "$data" >/dev/null 2>&1; then
		say "Postgres: running from $data on 127.0.0.1:$(sed -n 4p "$data/postmaster.pid") (pid $(head -n 1 "$data/postmaster.pid"))"
	else
		say "Postgres: stopped, in $data"
	fi
}

pg_stop() {
	local data
	data=$(pg_data)
	if [ -f "$data/postmaster.pid" ] && as_owner "$data" "$(pg_ctl_of "$data")" status -D "$data" >/dev/null 2>&1; then
		say "stopping Postgres in $data"
		as_owner "$data" "$(pg_ctl_of "$data")" stop -D "$data" -m fast -w -s
	fi
}

# The dev server's process ID when the recorded process is still this directory's server.
temporal_pid() {
	local pid
	pid=$(cat "$tp/server.pid" 2>/dev/null || true)
	if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--db-filename $tp/temporal.db "; then
		echo "$pid"
	fi
}

temporal_status() {
	local pid
	pid=$(temporal_pid)
	if [ -n "$pid" ]; then
		say "Temporal: running from $tp (pid $pid, $(tr '\0' ' ' <"/proc/$pid/cmdline" | grep -o -- '--port [0-9]*'))"
	elif [ -d "$tp" ]; then
		say "Temporal: stopped, in $tp"
	else
		say "Temporal: none in $tp"
	fi
}

temporal_stop() {
	local pid
	pid=$(temporal_pid)
	[ -n "$pid" ] || return 0
	say "stopping the Temporal dev server in $tp (pid $pid)"
	kill -TERM "$pid"
	for _ in $(seq 1 100); do
		[ -d "/proc/$pid" ] || return 0
		sleep 0.2
	done
	kill -KILL "$pid"
}

case "${1:-}" in
status)
	pg_status
	temporal_status
	;;
stop)
	pg_stop
	temporal_stop
	;;
clean)
	pg_stop
	temporal_stop
	data=$(pg_data)
	say "removing $pg and $tp"
	rm -rf -- "$data" "$pg" "$pg.lock" "$tp" "$tp.lock"
	;;
*)
	echo "usage: $0 status|stop|clean" >&2
	exit 2
	;;
esac
