package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/invariants"
)

// newAuditCommand is `jobbill audit`, the whole-system checker: the ledger and Temporal
// together, every job and account in scope. (`jobbill account audit ACCOUNT` replays one
// account's ledger alone.)
func newAuditCommand() *cobra.Command {
	var (
		opts         invariants.Options
		asJSON       bool
		anyTaskQueue bool
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check the money rules across the ledger and Temporal; exit 1 on any violation",
		Long: `Check every job and account in scope against the money rules (docs/design.md), reading both Postgres
and Temporal: each job's ledger rows against its state (rules 2 and 3), each account's balance
against the sum of its rows (rule 6), each account's revenue against its delivered work
(revenue recognised for work not delivered), placeholders no workflow will decide, open MeteredJob
workflows whose job the ledger never saw, jobs stuck submitting or running beyond their timeouts,
open workflows whose BillingState disagrees with the ledger, charged jobs no workflow will settle,
results recorded but never applied, ledger alarms, and (unscoped) a reconcile schedule that is
missing or points at a task queue nobody polls. It only reads.

Workflows are listed on the configured task queue only, because other ledgers (the tests', say)
may share the namespace; --any-task-queue lists every task queue.`,
		Example: `  jobbill audit
  jobbill audit --account acme --json
  jobbill audit --prefix chaos-42- --stuck-after 2m --grace 0s`,
		Args: cobra.NoArgs,
		RunE: cli.WithConns(func(cmd *cobra.Command, c *connect.Conns, _ []string) error {
			cfg, ledger, tc := c.Config, c.Ledger, c.Temporal

			opts.Ledger, opts.Temporal, opts.Namespace = ledger, tc, cfg.Temporal.Namespace
			// The schedule is the namespace's, not an account's: checked by a whole audit only.
			opts.Schedule = opts.AccountID == "" && opts.JobIDPrefix == ""
			if !anyTaskQueue {
				opts.TaskQueue = cfg.Temporal.TaskQueue
			}
			if opts.StuckAfter == 0 {
				// The jobs this deployment starts run under its configured policy.
				opts.StuckAfter = invariants.StuckAfterFor(cfg.Policy.WithDefaults())
			}
			report, err := invariants.Check(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if asJSON {
				err = report.WriteJSON(cmd.OutOrStdout())
			} else {
				err = report.WriteText(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if !report.OK() {
				return fmt.Errorf("%d violations of the money rules", len(report.Violations))
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opts.AccountID, "account", "", "check only this account, its jobs and their workflows")
	f.StringVar(&opts.JobIDPrefix, "prefix", "", "check only jobs and workflows whose ID starts with this")
	f.DurationVar(&opts.StuckAfter, "stuck-after", 0, "how long a job may stay submitting or running (default: the configured policy's attempts, backoff and timeouts, plus a quarter)")
	f.DurationVar(&opts.Grace, "grace", 2*time.Minute, "how long the reconcile pass gets to heal a placeholder without a workflow, a charged job without one, or a recorded result before each counts")
	f.BoolVar(&anyTaskQueue, "any-task-queue", false, "list MeteredJob workflows on every task queue of the namespace, not only the configured one")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
