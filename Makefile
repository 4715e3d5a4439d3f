# The two commands of the README's quick start, and the steps behind them.
# Every target starts what it needs (Postgres), so each one works on a fresh machine.

GO ?= go
GO_TEST_FLAGS ?= -count=1 -timeout 30m

.PHONY: run test test-cluster db temporal chromium temporal-cluster temporal-cluster-stop migrate vet bench-ledger bench-workflow

## run: start Postgres and the Temporal dev server, then run the worker and play the seven stories.
run: db temporal
	$(GO) run ./cmd/jobbill-dev run

## test: start Postgres and the Temporal dev server (and install Chromium for the console's browser
## tests when it is missing), then run every test (vet included).
test: db temporal chromium vet
	$(GO) test $(GO_TEST_FLAGS) ./...

# The frontend port of cluster mode's server; scripts/ensure-temporal-cluster.sh reads the same
# variable (its other JOBBILL_CLUSTER_* settings reach it from the environment too).
JOBBILL_CLUSTER_PORT ?= 7333
export JOBBILL_CLUSTER_PORT

## test-cluster: start cluster mode's server, then run the packages that drive a real Temporal —
## the end-to-end tests (jobs), the doors (doors) and the worker processes (worker) — against it,
## the worker's test restarting the server mid-run (under 2 minutes after the first build).
test-cluster: db temporal-cluster
	JOBBILL_TEMPORAL_ADDRESS=127.0.0.1:$(JOBBILL_CLUSTER_PORT) JOBBILL_TEST_TEMPORAL_RESTART=1 \
		$(GO) test $(GO_TEST_FLAGS) ./jobs/... ./doors/... ./worker/...

## db: start the local Postgres and create the role and databases (idempotent).
db:
	bash scripts/ensure-postgres.sh

## temporal: install the Temporal CLI if missing and start its dev server (idempotent).
temporal:
	bash scripts/ensure-temporal.sh

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

migrate: db
	$(GO) run ./cmd/jobbill migrate

vet:
	$(GO) vet ./...

## bench-ledger: the ledger lifecycles through the Go API against the same lifecycles in raw SQL under pgbench,
## on accounts without and with webhook endpoints, and the Go side on the pre-outbox ledger.
bench-ledger: db
	$(GO) run ./cmd/jobbill-dev bench-ledger

## bench-workflow: metered job throughput against a bare workflow, and result signal to reclaim row.
bench-workflow: db temporal
	$(GO) run ./cmd/jobbill-dev bench-workflow
