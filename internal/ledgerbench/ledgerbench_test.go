package ledgerbench_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jobbill/jobbill/internal/ledgerbench"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestRunSmall runs the whole benchmark at a toy size on the test database. Run fails unless both
// sides left exactly three ledger rows per lifecycle (money rule 2) and every account's balance
// equals the sum of its rows (rule 6), so a pass here means the raw script and the Go side
// compute the same, right money. pgbench is part of the machine's PostgreSQL install: without
// it this test fails rather than skips.
func TestRunSmall(t *testing.T) {
	ledgertest.Store(t) // migrates the test database
	var out strings.Builder
	res, err := ledgerbench.Run(context.Background(), ledgerbench.Config{
		// As the owner: the set-up and the raw side write the tables directly, which the
		// application role of ledgertest.DatabaseURL may not.
		DatabaseURL: ledgertest.MigrateDatabaseURL(),
		Clients:     2,
		Lifecycles:  20,
		Accounts:    5,
	}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	const rounds, lifecycles = 2, 2 * 20
	if res.Verified.Jobs != 2*rounds*lifecycles || res.Verified.LedgerRows != 3*2*rounds*lifecycles || res.Verified.Accounts != 2*5 {
		t.Errorf("verified %+v, want %d jobs, %d rows, 10 accounts", res.Verified, 2*rounds*lifecycles, 3*2*rounds*lifecycles)
	}
	if len(res.RawRounds) != rounds || len(res.GoRounds) != rounds {
		t.Errorf("%d raw and %d Go rounds, want %d each", len(res.RawRounds), len(res.GoRounds), rounds)
	}
	if res.Raw.LifecyclesPerSec <= 0 || res.Go.LifecyclesPerSec <= 0 || res.Ratio <= 0 {
		t.Errorf("figures raw %v, Go %v, ratio %v: all must be above zero", res.Raw, res.Go, res.Ratio)
	}
}

// TestRunFull is the real measurement, run only on request because it takes minutes and uses the
// benchmark database, not the test one:
//
//	LEDGERBENCH_DATABASE_URL=postgres://jobbill:jobbill@127.0.0.1:5432/jobbill?sslmode=disable \
//	LEDGERBENCH_LIFECYCLES=2500 go test ./internal/ledgerbench -run TestRunFull -v -timeout 30m
func TestRunFull(t *testing.T) {
	url := os.Getenv("LEDGERBENCH_DATABASE_URL")
	if url == "" {
		t.Skip("set LEDGERBENCH_DATABASE_URL to run the full benchmark")
	}
	lifecycles, _ := strconv.Atoi(os.Getenv("LEDGERBENCH_LIFECYCLES"))
	if _, err := ledgerbench.Run(context.Background(), ledgerbench.Config{DatabaseURL: url, Lifecycles: lifecycles}, os.Stdout); err != nil {
		t.Fatal(err)
	}
}
