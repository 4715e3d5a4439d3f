package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/internal/workerbench"
)

// newBenchWorkflowCommand is `jobbill-dev bench-workflow`: the metered job workflow against a bare
// workflow on the configured Temporal server and ledger, in one run; see workerbench.
func newBenchWorkflowCommand() *cobra.Command {
	var cfg workerbench.Config
	cmd := &cobra.Command{
		Use:   "bench-workflow",
		Short: "Benchmark the metered job workflow against a bare workflow, and result-signal-to-reclaim latency",
		Long: `Starts a worker on a task queue of its own against the configured Temporal server
(temporal.address) and ledger (database_url), then:
  - throughput: jobs/s from submission through the job service to the settled workflow, for metered
    jobs ("sim:ok", a tiny simulated duration) and for a bare workflow that runs only the work
    activity, alternately (bare, metered, then metered, bare), with --concurrency submitters; prints
    each round, the medians and the ratio metered/bare (goal >= 0.95x on an idle machine);
  - latency: from sending a result signal to a refunded job that is listening for a late result,
    to its reclaim row (Postgres' created_at minus the send time, on the same machine's clock):
    p50/p95/p99/max (goal p99 <= 50 ms on an idle machine);
  - with --webhooks, the latency again with webhook delivery on (an endpoint per account, a
    receiver in this process, a delivery worker with the default configuration), then off once
    more, printed beside the first measurement (delivery off);
  - the money: every job's ledger rows and every account's audit;
  - per job, the history events (metered, bare, recovered) and the CPU of the Temporal server's
    process and of the Postgres backends (ledger, and --temporal-databases).
With --waiting N it instead holds N refunded jobs listening for a late result at once, reports
this process's RSS and the databases' sizes, then result-to-reclaim latency one result at a time
(--probe) and in a burst (--burst within --burst-within), and checks every job's money.
It writes fresh accounts and jobs on every run (the ledger never deletes): point it at the
service's database, never the tests'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cli.LoadConfig()
			if err != nil {
				return err
			}
			cfg.DatabaseURL = c.DatabaseURL
			cfg.TemporalAddress = c.Temporal.Address
			cfg.Namespace = c.Temporal.Namespace
			cfg.WorkflowCacheSize = c.Temporal.WorkflowCacheSize
			if _, err := workerbench.Run(cmd.Context(), cfg, cmd.OutOrStdout()); err != nil {
				return fmt.Errorf("bench-workflow: %w", err)
			}
			return nil
		},
	}
	flags := cmd.Flags()
	flags.IntVar(&cfg.Jobs, "jobs", 200, "jobs per side and round")
	flags.IntVar(&cfg.Concurrency, "concurrency", 20, "concurrent submitters, each waiting for its job to settle before the next")
	flags.IntVar(&cfg.Rounds, "rounds", 2, "rounds per side (bare, metered, then metered, bare, and so on)")
	flags.IntVar(&cfg.Warmup, "warmup", 20, "uncounted jobs per side before the first round (-1 for none)")
	flags.DurationVar(&cfg.WorkDuration, "work-duration", 0, "simulated work per job (default 5ms)")
	flags.IntVar(&cfg.LatencyJobs, "latency-jobs", 150, "refunded jobs that get a result signal (-1 for none)")
	flags.DurationVar(&cfg.SignalInterval, "signal-interval", 0, "time between result signals (default 100ms)")
	flags.BoolVar(&cfg.Webhooks, "webhooks", false, "measure the latency again with webhook delivery on, then off again, and print the three")
	addScaleFlags(flags, &cfg)
	return cmd
}
