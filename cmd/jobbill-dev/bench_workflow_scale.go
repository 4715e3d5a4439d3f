package main

import (
	"github.com/spf13/pflag"

	"github.com/jobbill/jobbill/internal/workerbench"
)

// addScaleFlags adds bench-workflow's flags for the cost of a job to the machinery under it and
// for the many-waiting-jobs mode (workerbench.ProcessConfig, workerbench.WaitingConfig).
func addScaleFlags(flags *pflag.FlagSet, cfg *workerbench.Config) {
	flags.IntVar(&cfg.Processes.ServerPID, "server-pid", 0,
		"the Temporal server's process, for its CPU per job (default: the process listening on temporal.address's port)")
	flags.StringSliceVar(&cfg.Processes.TemporalDatabases, "temporal-databases", nil,
		"the Temporal server's Postgres databases, whose backends' CPU counts with the ledger's (cluster mode: temporal,temporal_visibility; none for the dev server)")
	flags.IntVar(&cfg.Processes.HistorySample, "history-sample", 20,
		"jobs of each side's last round whose history is read for the events per job (-1 for none)")
	flags.IntVar(&cfg.Waiting.Jobs, "waiting", 0,
		"instead of the throughput rounds: this many refunded jobs waiting for a late result at once; measures memory, database sizes, then result-to-reclaim latency one at a time and in a burst")
	flags.IntVar(&cfg.Waiting.Burst, "burst", 1000, "with --waiting: late results in the burst")
	flags.DurationVar(&cfg.Waiting.BurstWithin, "burst-within", 0, "with --waiting: the burst's results are sent evenly over this (default 1m)")
	flags.IntVar(&cfg.Waiting.Probe, "probe", 150, "with --waiting: late results sent one every --signal-interval before the burst")
}
