package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/internal/ledgerbench"
)

// newBenchLedgerCommand is `jobbill-dev bench-ledger` (make bench-ledger): the ledger's fixed-price
// and metered lifecycles through the Go API beside the same lifecycles in raw SQL under pgbench,
// in one run; see ledgerbench.
func newBenchLedgerCommand() *cobra.Command {
	var cfg ledgerbench.Config
	cmd := &cobra.Command{
		Use:   "bench-ledger",
		Short: "Benchmark the ledger's job lifecycles through the Go API against raw SQL under pgbench",
		Long: `Runs two job lifecycles with concurrent clients, through the ledgerdb Go API and as raw SQL
under pgbench, alternately (raw, Go, raw, Go):
  fixed    a fixed-price job: charge, refund, duplicate refund, reclaim (3 ledger rows);
  metered  a job metered by the GPU-second: charge of its hold, refund, duplicate refund, and
           its late result settled with its usage (reclaim and release in one call, 4 rows).
Each lifecycle runs on accounts without webhook endpoints and on accounts with one each
(fixed+hooks, metered+hooks), a delivery worker deriving and delivering their events to a local
receiver meanwhile; and the fixed one on accounts funded with several credit blocks, so that
charges draw across blocks (fixed+blocks). The raw side writes the same durable facts as the Go
side, the moves of credits between blocks included. Each round also
runs the Go side on the pre-outbox ledger (schema ledgerbench_pre_outbox: the same functions
without what events need), for the absolute cost of events; --skip-pre-outbox leaves it out.
Each side starts right after a CHECKPOINT, so that no side pays for the full-page writes of a
checkpoint another side's WAL began (the owner needs pg_checkpoint, which make db grants);
--skip-checkpoints leaves it out.
It sets its two kinds on the price list (ledgerbench-fixed, ledgerbench-metered) and runs on the
database of --migrate-database-url / JOBBILL_MIGRATE_DATABASE_URL (the service's database as its
owner by default, never the tests'): the raw side and the set-up write the tables directly, which
the application role of --database-url may not.
Prints each side's lifecycles/s, transitions/s, mean and p99 latency per lifecycle (and per
transition on the Go sides), how soon after a round its events were all delivered, the medians,
the ratio Go/raw of each lifecycle and Go/pre-outbox Go, after checking that both sides wrote exactly the money they
should. It writes fresh accounts and jobs on every run (the ledger never deletes), so point it at
a database meant for benchmarks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.DatabaseURL = cli.MigrateDatabaseURL()
			if _, err := ledgerbench.Run(cmd.Context(), cfg, cmd.OutOrStdout()); err != nil {
				return fmt.Errorf("bench-ledger: %w", err)
			}
			return nil
		},
	}
	flags := cmd.Flags()
	flags.IntVar(&cfg.Clients, "clients", 16, "concurrent clients on each side (pgbench -c; goroutines and pool connections)")
	flags.IntVar(&cfg.Lifecycles, "lifecycles", ledgerbench.DefaultLifecycles, "job lifecycles per client, per round, side and lifecycle")
	flags.IntVar(&cfg.Accounts, "accounts", 1000, "fresh accounts per side and lifecycle that the jobs are spread over")
	flags.IntVar(&cfg.Rounds, "rounds", 2, "rounds per side and lifecycle, alternating raw and Go; the medians are reported")
	flags.StringSliceVar(&cfg.Only, "lifecycle", nil, "run only these lifecycles (fixed, metered, fixed+blocks, fixed+hooks, metered+hooks; repeat or separate with commas)")
	flags.BoolVar(&cfg.SkipPreOutbox, "skip-pre-outbox", false, "leave out the Go side on the pre-outbox ledger")
	flags.BoolVar(&cfg.SkipCheckpoints, "skip-checkpoints", false, "start each side wherever the checkpoint cycle stands, not right after a checkpoint")
	return cmd
}
