package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/internal/ledgerbench"
)

// newBenchLedgerCommand is `jobbill-dev bench-ledger` (make bench-ledger): the ledger lifecycle through
// the Go API beside the same lifecycle in raw SQL under pgbench, in one run; see ledgerbench.
func newBenchLedgerCommand() *cobra.Command {
	var cfg ledgerbench.Config
	cmd := &cobra.Command{
		Use:   "bench-ledger",
		Short: "Benchmark the ledger lifecycle through the Go API against raw SQL under pgbench",
		Long: `Runs charge, refund, duplicate refund and reclaim per job with concurrent clients, through
the ledgerdb Go API and as raw SQL under pgbench, alternately (raw, Go, raw, Go), on the database
of --migrate-database-url / JOBBILL_MIGRATE_DATABASE_URL (the service's database as its owner by
default, never the tests'): the raw side and the set-up write the tables directly, which the
application role of --database-url may not.
Prints each side's lifecycles/s, transitions/s and mean latency, the medians and the ratio Go/raw,
after checking that both sides wrote exactly the money they should. It writes fresh accounts and
jobs on every run (the ledger never deletes), so point it at a database meant for benchmarks.`,
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
	flags.IntVar(&cfg.Lifecycles, "lifecycles", ledgerbench.DefaultLifecycles, "job lifecycles per client, per round and side")
	flags.IntVar(&cfg.Accounts, "accounts", 1000, "fresh accounts per side that the jobs are spread over")
	return cmd
}
