# The two commands of the README's quick start, and the steps behind them.
# Every target starts what it needs (Postgres), so each one works on a fresh machine.

GO ?= go
GO_TEST_FLAGS ?= -count=1 -timeout 30m

.PHONY: run test db migrate vet bench-ledger

## run: start Postgres, migrate, and play the ledger demo.
run: db
	$(GO) run ./cmd/jobbill migrate
	$(GO) run ./cmd/jobbill demo

## test: start Postgres and run every test (vet included).
test: db vet
	$(GO) test $(GO_TEST_FLAGS) ./...

## db: start the local Postgres and create the role and databases (idempotent).
db:
	bash scripts/ensure-postgres.sh

migrate: db
	$(GO) run ./cmd/jobbill migrate

vet:
	$(GO) vet ./...

## bench-ledger: the ledger lifecycle through the Go API against the same lifecycle in raw SQL under pgbench.
bench-ledger: db
	$(GO) run ./cmd/jobbill bench-ledger
