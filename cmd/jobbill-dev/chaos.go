package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/chaos"
	"github.com/jobbill/jobbill/internal/cli"
)

// newChaosCommand is `jobbill-dev chaos`, the chaos run: jobs through real worker processes while
// workers are SIGKILLed, the run's own Temporal dev server is restarted, (with --restart-postgres)
// Postgres too, and an operator terminates and resets jobs' workflows; the workers' scheduled
// reconcile pass heals; then the invariant checker. It exits 1 on any violation or anomaly.
func newChaosCommand() *cobra.Command {
	cfg := chaos.DefaultConfig()
	cfg.Jobs = 2000
	cfg.Seed = 0
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run N jobs through real workers while killing and restarting everything; then audit",
		Long: `Start a Temporal dev server of the run's own (free ports, a file store in a temporary
directory) and two ` + "`jobbill worker`" + ` processes, submit the jobs (a seeded mix of the simulated
runner's scenarios) and meanwhile, at seeded moments: SIGKILL a worker and restart it, report results
twice, delete settled jobs and resubmit their IDs (ErrGone expected), resubmit live IDs (the
original expected), write placeholders with no workflow, terminate jobs' running workflows and
reset others to their first workflow task (as an operator does in the Temporal UI), restart the
dev server once — reporting results while it is down, which are recorded — and, with
--restart-postgres, Postgres once (only when nothing else uses the cluster).

Its accounts hold credit blocks: promotional and paid (with a cost basis), of different
priorities, some starting mid-run and at least one per account expiring mid-run, which the
workers' expiry pass (every --expiry-interval) removes while jobs draw from, refund to and release
to it; pending grants confirmed paid or failed mid-run; and, on the poor account, an automatic
top-up rule whose topup.requested webhooks the workers deliver to a receiver of the run's own on
127.0.0.1, which verifies their Standard Webhooks signatures and pays each with a grant under the
event's idempotency key, sometimes twice.

Nothing but the reconcile schedule the workers create (a pass every --pass-interval) heals: the driver follows
jobs in the ledger and through Temporal's describe, never through the job service's status read,
which heals on read (--reads turns such reads on). It waits until the run is at rest, every
orphan, terminated job and recorded result repaired within ` + fmt.Sprint(chaos.HealPasses) + ` scheduled passes, checks that every
terminated job ended refunded (or delivered or recovered by its result) and every recorded result
was billed, and runs the invariant checker on the run's job-ID prefix. Then it checks the credit
mix: every run account's audit (no block spent before its start or after its expiry), each block
that expired mid-run removed by exactly one expire row of the pass (and any a return caused, each
naming its return) and holding nothing, a confirmed pending grant written once and a failed one
never, every top-up request paid by exactly one grant under its key within the month's cap, and
the revenue report reconciling for each account.

The ledger is the configured database_url (migrated first as migrate_database_url). It must be a
database of the run's own: the workers' pass heals every account of it, so the run refuses one
holding another deployment's jobs that the pass would act on.`,
		Example: `  jobbill-dev chaos --jobs 2000 --seed 42 --restart-postgres \
    --database-url postgres://jobbill_app:jobbill_app@127.0.0.1:5432/jobbill_chaos \
    --migrate-database-url postgres://jobbill:jobbill@127.0.0.1:5432/jobbill_chaos
  jobbill-dev chaos --jobs 200 --seed 7 --reads --database-url ... --migrate-database-url ...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Seed == 0 {
				// A seed is always printed, so a run picked at random can still be repeated.
				cfg.Seed = uint64(time.Now().UnixNano())
			}
			if cfg.Binary == "" {
				// The workers are the product binary, which this tool is not: build it.
				dir, err := os.MkdirTemp("", "jobbill-chaos-bin-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				if cfg.Binary, err = chaos.BuildProduct(dir); err != nil {
					return err
				}
			}
			c, err := cli.LoadConfig()
			if err != nil {
				return err
			}
			cfg.DatabaseURL, cfg.MigrateDatabaseURL = c.DatabaseURL, cli.MigrateDatabaseURL()
			report, err := chaos.Run(cmd.Context(), cfg, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if !report.OK() {
				return fmt.Errorf("chaos run (seed %d): %d violations, %d anomalies", report.Seed, len(report.Violations), len(report.Anomalies))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "chaos run (seed %d): zero violations\n", report.Seed)
			return nil
		},
	}
	chaosFlags(cmd, &cfg)
	return cmd
}

// chaosFlags binds the chaos command's flags to cfg.
func chaosFlags(cmd *cobra.Command, cfg *chaos.Config) {
	f := cmd.Flags()
	f.IntVar(&cfg.Jobs, "jobs", cfg.Jobs, "how many jobs to submit")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed of every choice of the run (default: from the clock, printed)")
	f.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "submissions in flight at once")
	f.Float64Var(&cfg.Rate, "rate", cfg.Rate, "jobs submitted per second (spreads the injections over jobs/rate seconds)")
	f.DurationVar(&cfg.KillEvery, "kill-every", cfg.KillEvery, "mean time between two SIGKILLs of a worker")
	f.BoolVar(&cfg.RestartTemporal, "restart-temporal", cfg.RestartTemporal, "restart the run's own Temporal dev server once")
	f.BoolVar(&cfg.RestartPostgres, "restart-postgres", false, "restart Postgres once (pg_ctlcluster 15 main restart): only when nothing else uses it")
	f.IntVar(&cfg.Orphans, "orphans", cfg.Orphans, "placeholders without a workflow to write and heal")
	f.IntVar(&cfg.OutageResults, "outage-results", cfg.OutageResults, "results to report while the dev server is down (recorded, then applied by the pass)")
	f.BoolVar(&cfg.Reads, "reads", false, "also read jobs through the job service's status, which heals on read (default: only the scheduled pass heals)")
	f.DurationVar(&cfg.PassInterval, "pass-interval", cfg.PassInterval, "the workers' reconcile.interval")
	f.DurationVar(&cfg.ExpiryInterval, "expiry-interval", cfg.ExpiryInterval, "the workers' expiry.interval (the expiry pass removes what remains of the blocks that expire mid-run)")
	f.StringVar(&cfg.Binary, "binary", "", "jobbill binary the workers run (default: built from ./cmd/jobbill)")
	f.StringVar(&cfg.WorkDir, "work-dir", "", "keep the dev server's store and the processes' logs here (default: a temporary directory, removed)")
}
