package workerbench_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobbill/jobbill/internal/workerbench"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// TestRunSmall runs the workflow benchmark at a toy size on the tests' Temporal and database.
// Run fails unless every metered job has exactly its ledger rows — one charge; one refund and one
// reclaim for each job that got a late result (the reversing-pairs and net-effect rules) — and
// every account audits clean with its grant less its jobs' cost (the sum-of-rows rule); so a pass
// means the benchmark's money check finds the jobs it ran. It also checks the per-job figures are
// read: the history of each side and the CPU of this machine's processes, compared side to side
// and beside the ceiling the ledger's own Postgres CPU sets;
// and that each side runs first in every other round, so that neither is always charged the drift
// of the round before it. Speed is reported, never asserted.
func TestRunSmall(t *testing.T) {
	ledgertest.Store(t) // migrates the test database
	cfg := workertest.Config("workerbench")
	var out strings.Builder
	res, err := workerbench.Run(context.Background(), workerbench.Config{
		DatabaseURL:     ledgertest.DatabaseURL(),
		TemporalAddress: cfg.Temporal.Address,
		Namespace:       cfg.Temporal.Namespace,
		Jobs:            6,
		Concurrency:     3,
		Rounds:          2,
		Warmup:          -1,
		LatencyJobs:     3,
		SignalInterval:  10 * time.Millisecond,
		Processes:       workerbench.ProcessConfig{HistorySample: 2},
	}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.JobsChecked != 2*6+3 || res.Latency.Jobs != 3 {
		t.Fatalf("checked %d jobs and %d latencies, want 15 and 3", res.JobsChecked, res.Latency.Jobs)
	}
	var order []string
	for _, rd := range res.Rounds {
		order = append(order, fmt.Sprintf("%d:%s", rd.Round, rd.Side))
	}
	if got, want := strings.Join(order, " "), "1:bare 1:metered 2:metered 2:bare"; got != want {
		t.Fatalf("rounds ran in the order %q, want %q", got, want)
	}
	if res.CPURatio <= 0 || !strings.Contains(out.String(), "machine CPU per job") {
		t.Fatalf("the machine CPU per job of the two sides is not compared: ratio %v", res.CPURatio)
	}
	if c := res.JobCost.LedgerCeiling(); c <= 0 || c > 1 || !strings.Contains(out.String(), "the ledger alone") {
		t.Fatalf("the ceiling the ledger's own Postgres CPU sets on the CPU ratio is not reported: %v", c)
	}
	for _, side := range []string{"bare", "metered", "recovered"} {
		s := res.JobCost.Sides[side]
		if s == nil || s.HistoryJobs != 2 || s.Events == 0 {
			t.Fatalf("side %s: no history events counted: %+v", side, s)
		}
	}
}
