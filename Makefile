# The two commands of the README's quick start, the steps behind them, and the fast check.
# Every target starts what it needs (Postgres), so each one works on a fresh machine; `make check`
# needs nothing but Go. `make` alone lists the targets, from the `## name: text` comment above each.

GO ?= go
GO_TEST_FLAGS ?= -count=1 -timeout 30m

.DEFAULT_GOAL := help

.PHONY: help check fmt-check lint workflowcheck test-short run test model-soak test-cluster db temporal chromium temporal-cluster temporal-cluster-stop migrate vet bench-ledger bench-workflow test-services-stop test-services-clean

## help: list the targets (the default goal).
help:
	@awk '/^## [a-z-]+:/ { line = substr($$0, 4); i = index(line, ":"); \
		printf "  %-22s %s\n", substr(line, 1, i - 1), substr(line, i + 2); next } \
		/^## / { printf "  %-22s %s\n", "", substr($$0, 4) }' $(MAKEFILE_LIST)

# What `make check` runs, and why. It is the check to run before every commit, with no Postgres
# and no Temporal. On 2 busy cores with warm caches it took 21 s when no test had changed (14 s of
# it workflowcheck, which keeps no cache) and under 2 minutes when every test ran again (the tests
# 1.5 min of it); the first run builds everything under -race and takes several times longer.
# - gofmt: the one layout, so that diffs show only what changed.
# - go vet: the compiler's own suspicious-construct checks.
# - staticcheck (pinned as a tool in go.mod, so every machine runs the same version): bugs vet does
#   not find, deprecated SDK calls, dead code. A finding that is wrong for one line is silenced
#   there with //lint:ignore and a reason.
# - workflowcheck (Temporal's, pinned the same way) on the workflows package: a workflow must
#   replay exactly, and this finds map iteration, time.Now, goroutines and the like reachable from
#   a workflow before a replay test has to. workflowcheck.config.yaml says why each function it
#   is told to trust is deterministic.
# - the tests with -short and -race: every test that needs Postgres or Temporal skips under
#   -short (the helpers in ledgerdb/ledgertest and worker/workertest skip first), so what runs are
#   the unit tests, the workflow tests in Temporal's test environment and the replay tests, under
#   the race detector. The test database and Temporal addresses point at a closed port, so a test
#   that reaches a service without skipping fails here instead of quietly using one.
# `make test` runs everything, services included.
#
# Which services the tests use: the ones these variables name. `make test` and `make test-cluster`
# name the local cluster of `make db` and the dev server of `make temporal` (or cluster mode's),
# so that CI (.ci/run, which names a database of its own) and a developer's run use exactly what
# they started. A plain `go test` with none of them set starts services of the checkout's own
# instead (.dev/pgtest, .dev/temporal-test; docs/development.md, "Services and settings"), which
# `make test-services-stop` stops.
JOBBILL_PG_TEST_DB ?= jobbill_test
JOBBILL_TEMPORAL_PORT ?= 7233
JOBBILL_TEST_DATABASE_URL ?= postgres://jobbill_app:jobbill_app@127.0.0.1:5432/$(JOBBILL_PG_TEST_DB)?sslmode=disable
JOBBILL_TEST_MIGRATE_DATABASE_URL ?= postgres://jobbill:jobbill@127.0.0.1:5432/$(JOBBILL_PG_TEST_DB)?sslmode=disable
JOBBILL_TEMPORAL_ADDRESS ?= 127.0.0.1:$(JOBBILL_TEMPORAL_PORT)
TEST_DATABASE = JOBBILL_TEST_DATABASE_URL="$(JOBBILL_TEST_DATABASE_URL)" \
	JOBBILL_TEST_MIGRATE_DATABASE_URL="$(JOBBILL_TEST_MIGRATE_DATABASE_URL)"

CHECK_TEST_FLAGS ?= -timeout 10m
CHECK_CLOSED ?= 127.0.0.1:1

## check: the fast check before a commit, no services: gofmt, go vet, staticcheck, workflowcheck
## on the workflows package, and the tests that need no service with -race (-short).
check: fmt-check vet lint workflowcheck test-short

## fmt-check: fail, listing them, when Go files are not gofmt-formatted.
fmt-check:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt -w these files:"; echo "$$unformatted"; exit 1; fi

## lint: staticcheck, the version go.mod pins as a tool.
lint:
	$(GO) tool staticcheck ./...

## workflowcheck: Temporal's determinism check on the workflows package (go.mod pins it as a tool).
workflowcheck:
	$(GO) tool workflowcheck -config workflowcheck.config.yaml ./workflows/...

## test-short: the tests that need no service, with the race detector (Postgres and Temporal
## pointed at a closed port, so a test that needs one and does not skip fails).
test-short:
	JOBBILL_TEST_DATABASE_URL="postgres://jobbill_app@$(CHECK_CLOSED)/none?sslmode=disable" \
	JOBBILL_TEST_MIGRATE_DATABASE_URL="postgres://jobbill@$(CHECK_CLOSED)/none?sslmode=disable" \
	JOBBILL_TEMPORAL_ADDRESS=$(CHECK_CLOSED) \
		$(GO) test -short -race $(CHECK_TEST_FLAGS) ./...

## run: start Postgres and the Temporal dev server, then run the worker (webhook delivery beside
## it) and the API, and play the nine stories. Ctrl-C stops it cleanly: the command exits 0.
run: db temporal
	$(GO) run ./cmd/jobbill-dev run

## test: start Postgres and the Temporal dev server (and install Chromium for the console's browser
## tests when it is missing), then run every test (vet included) against them.
test: db temporal chromium vet
	$(TEST_DATABASE) JOBBILL_TEMPORAL_ADDRESS="$(JOBBILL_TEMPORAL_ADDRESS)" $(GO) test $(GO_TEST_FLAGS) ./...

## model-soak: start Postgres, then hold the ledger to the reference model of the money rules for a
## long run (MODEL_SEQUENCES sequences of MODEL_STEPS steps; a failure prints the seed to replay).
MODEL_SEQUENCES ?= 40
MODEL_STEPS ?= 500
model-soak: db
	$(TEST_DATABASE) JOBBILL_MODEL_SEQUENCES=$(MODEL_SEQUENCES) JOBBILL_MODEL_STEPS=$(MODEL_STEPS) \
		$(GO) test -count=1 -timeout 0 -v -run 'TestLedgerHeldToTheModel|TestSameEventsInAnyOrderEndWithTheSameMoney' ./ledgerdb/

# The frontend port of cluster mode's server; scripts/ensure-temporal-cluster.sh reads the same
# variable (its other JOBBILL_CLUSTER_* settings reach it from the environment too).
JOBBILL_CLUSTER_PORT ?= 7333
export JOBBILL_CLUSTER_PORT

## test-cluster: start cluster mode's server, then run the packages that drive a real Temporal —
## the end-to-end tests (jobs), the doors (doors) and the worker processes (worker) — against it,
## the worker's test restarting the server mid-run (under 2 minutes after the first build).
test-cluster: db temporal-cluster
	$(TEST_DATABASE) JOBBILL_TEMPORAL_ADDRESS=127.0.0.1:$(JOBBILL_CLUSTER_PORT) JOBBILL_TEST_TEMPORAL_RESTART=1 \
		$(GO) test $(GO_TEST_FLAGS) ./jobs/... ./doors/... ./worker/...

## db: start the local Postgres and create the role and databases (idempotent).
db:
	bash scripts/ensure-postgres.sh

## temporal: install the Temporal CLI if missing and start its dev server (idempotent).
temporal:
	bash scripts/ensure-temporal.sh

## test-services-stop: stop the Postgres cluster and the Temporal dev server that the tests started
## for this checkout when no URL named one (.dev/pgtest, .dev/temporal-test); their data stays.
test-services-stop:
	bash scripts/test-services.sh stop

## test-services-clean: stop them and remove their data; the next test run makes them anew.
test-services-clean:
	bash scripts/test-services.sh clean

## chromium: install headless Chromium (the Debian package) if missing, for the console's browser tests.
chromium:
	bash scripts/ensure-chromium.sh

## temporal-cluster: the real Temporal server (the compose file's version) on the local Postgres,
## without Docker, on 127.0.0.1:7333 beside the dev server; builds it the first time (idempotent).
temporal-cluster: db
	bash scripts/ensure-temporal-cluster.sh

## temporal-cluster-stop: stop the cluster-mode server; its data stays in Postgres.
temporal-cluster-stop:
	bash scripts/ensure-temporal-cluster.sh stop

## migrate: start Postgres, then migrate the service's database (`jobbill migrate`).
migrate: db
	$(GO) run ./cmd/jobbill migrate

## vet: go vet on every package.
vet:
	$(GO) vet ./...

## bench-ledger: the ledger lifecycles through the Go API against the same lifecycles in raw SQL under pgbench,
## on accounts without and with webhook endpoints, and the Go side on the pre-outbox ledger.
bench-ledger: db
	$(GO) run ./cmd/jobbill-dev bench-ledger

## bench-workflow: metered job throughput against a bare workflow, and result signal to reclaim row.
bench-workflow: db temporal
	$(GO) run ./cmd/jobbill-dev bench-workflow
