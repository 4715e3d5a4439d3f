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

// TestRunSmall runs the whole benchmark at a toy size on the test database, both lifecycles, on
// accounts without and with webhook endpoints, the fixed one on accounts funded with several
// credit blocks, and the pre-outbox path.
// Run fails unless both sides left exactly the ledger rows each lifecycle should (the
// reversing-pairs rule: charge, refund and reclaim of the hold, and for the metered lifecycle a
// release of the part its usage left), every job recovered (and settled at its usage) and every
// account's balance equal to the sum of its rows (the sum-of-rows rule) and to its grant less what
// its jobs cost; and unless every row moved its credits among the account's blocks as the ledger
// functions do (a charge and a reclaim draw in the order of spending, promotional first; a refund
// and a release give back to the blocks drawn from, the last drawn first), each block holding what
// its moves leave it. So a pass here means the raw scripts and the Go side compute the same, right
// money, down to the blocks; this test also wants charges of the several-block accounts to have
// drawn across blocks, and the accounts with endpoints to have got one webhook event per money
// row, each delivered.
// pgbench is part of the machine's PostgreSQL install: without it this test fails rather than
// skips. Speed is reported, never asserted: a toy run's figures mean nothing.
func TestRunSmall(t *testing.T) {
	ledgertest.Store(t) // migrates the test database
	var out strings.Builder
	const clients, lifecycles, accounts = 2, 20, 5
	res, err := ledgerbench.Run(context.Background(), ledgerbench.Config{
		// As the owner: the set-up and the raw side write the tables directly, which the
		// application role of ledgertest.DatabaseURL may not.
		DatabaseURL: ledgertest.MigrateDatabaseURL(),
		Clients:     clients,
		Lifecycles:  lifecycles,
		Accounts:    accounts,
		// The tests share the database: no checkpoint before each side (TestRunOnlyTheLifecyclesNamed
		// takes them, for one round).
		SkipCheckpoints: true,
	}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	const rounds, sides = 2, 2
	const jobs = sides * rounds * clients * lifecycles // per lifecycle
	// Fixed, fixed+blocks and fixed+hooks; metered and metered+hooks. The accounts of the four
	// single-block lifecycles hold an opening block and a grant's; those of fixed+blocks, three
	// grants' besides their opening one.
	want := ledgerbench.Verification{FixedJobs: 3 * jobs, FixedRows: 3 * 3 * jobs, MeteredJobs: 2 * jobs, MeteredRows: 2 * 4 * jobs,
		Accounts: 5 * sides * accounts, Blocks: (4*2 + 4) * sides * accounts, Events: 2 * 3 * jobs}
	if res.Verified.CrossingDraws == 0 {
		t.Errorf("no charge or reclaim of fixed+blocks drew from more than one block")
	}
	got := res.Verified
	got.CrossingDraws = 0 // how many cross depends on how the clients interleave
	if got != want {
		t.Errorf("verified %+v, want %+v", got, want)
	}
	if !res.FixedBlocks.Blocks || res.FixedBlocks.Lifecycle != ledgerbench.Fixed {
		t.Errorf("fixed+blocks is %+v", res.FixedBlocks)
	}
	for _, c := range []ledgerbench.Comparison{res.Fixed, res.Metered, res.FixedBlocks, res.FixedHooked, res.MeteredHooked} {
		if len(c.RawRounds) != rounds || len(c.GoRounds) != rounds {
			t.Errorf("%s: %d raw and %d Go rounds, want %d each", c.Lifecycle, len(c.RawRounds), len(c.GoRounds), rounds)
		}
		if c.Raw.LifecyclesPerSec <= 0 || c.Go.LifecyclesPerSec <= 0 || c.Ratio <= 0 || c.Go.P99Transition <= 0 {
			t.Errorf("%s: figures raw %v, Go %v, ratio %v: all must be above zero", c.Lifecycle, c.Raw, c.Go, c.Ratio)
		}
		if c.Endpoints != (c.Raw.Drain > 0 && c.Go.Drain > 0) {
			t.Errorf("%s (endpoints %v): drains raw %v, Go %v: measured exactly with endpoints", c.Lifecycle, c.Endpoints, c.Raw.Drain, c.Go.Drain)
		}
	}
	for _, c := range []ledgerbench.Comparison{res.Fixed, res.Metered, res.FixedBlocks} {
		if len(c.PreOutboxRounds) != rounds || c.OverPreOutbox <= 0 {
			t.Errorf("%s: %d pre-outbox rounds, Go/pre-outbox %v: want %d rounds and a ratio", c.Lifecycle, len(c.PreOutboxRounds), c.OverPreOutbox, rounds)
		}
	}
	if res.Fixed.Lifecycle != ledgerbench.Fixed || res.Metered.Lifecycle != ledgerbench.Metered {
		t.Errorf("lifecycles %q and %q, want %q and %q", res.Fixed.Lifecycle, res.Metered.Lifecycle, ledgerbench.Fixed, ledgerbench.Metered)
	}
	for _, line := range []string{"ratio Go/raw, fixed:", "ratio Go/raw, metered:", "ratio Go/raw, fixed+blocks:"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the report has no %q line", line)
		}
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

// TestRunOnlyTheLifecyclesNamed runs one lifecycle of the benchmark, and refuses a name that is
// none of them, clearly and before it writes anything: a misspelt lifecycle must not cost a long
// run that measures something else. The money check still runs on what was run (both sides
// recovered every job at its price, balances equal to the sum of rows), so a run of one lifecycle
// is verified as a whole run is.
func TestRunOnlyTheLifecyclesNamed(t *testing.T) {
	ledgertest.Store(t)
	var out strings.Builder
	cfg := ledgerbench.Config{DatabaseURL: ledgertest.MigrateDatabaseURL(), Clients: 2, Lifecycles: 5, Accounts: 2, Rounds: 1,
		SkipPreOutbox: true, Only: []string{"fixed+block"}}
	if _, err := ledgerbench.Run(context.Background(), cfg, &out); err == nil ||
		!strings.Contains(err.Error(), `no lifecycle "fixed+block"`) || !strings.Contains(err.Error(), "fixed+blocks") {
		t.Fatalf("an unknown lifecycle answered %v, want an error naming it and the lifecycles there are", err)
	}
	if strings.Contains(out.String(), "prepared") {
		t.Errorf("an unknown lifecycle still prepared accounts and jobs:\n%s", out.String())
	}

	out.Reset()
	cfg.Only = []string{"metered"}
	res, err := ledgerbench.Run(context.Background(), cfg, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 2 * 1 * 2 * 5 // sides × rounds × clients × lifecycles
	if res.Verified.MeteredJobs != jobs || res.Verified.FixedJobs != 0 {
		t.Errorf("verified %+v, want %d metered jobs and no fixed ones", res.Verified, jobs)
	}
	if strings.Contains(out.String(), "lifecycle fixed") || strings.Contains(out.String(), "round 1  fixed") {
		t.Errorf("a run of the metered lifecycle ran a fixed one:\n%s", out.String())
	}
	// Each side started right after a checkpoint (make db grants the owner pg_checkpoint).
	if n := strings.Count(out.String(), ", from a checkpoint, "); n != 2 {
		t.Errorf("%d sides started from a checkpoint, want both:\n%s", n, out.String())
	}
}
