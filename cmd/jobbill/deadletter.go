package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

func newDeadLetterCommand() *cobra.Command {
	dlq := &cobra.Command{
		Use:     "dlq",
		Aliases: []string{"dead-letters"},
		Short:   "Read dead letters: jobs refunded because their work failed for good",
	}
	var account string
	var all bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered jobs (open and closed workflows) with their ledger state",
		Args:  cobra.NoArgs,
		RunE: cli.WithConns(func(cmd *cobra.Command, c *connect.Conns, _ []string) error {
			cfg, ledger, tc := c.Config, c.Ledger, c.Temporal
			query := fmt.Sprintf("WorkflowType = '%s' AND %s = true", workflows.WorkflowType, workflows.SearchAttributeDeadLettered)
			if account != "" {
				if err := ledgerdb.ValidateID("account ID", account); err != nil {
					return err
				}
				query += fmt.Sprintf(" AND %s = '%s'", workflows.SearchAttributeAccountID, account)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "JOB\tACCOUNT\tLEDGER STATE\tWORKFLOW\tCLOSED AT\tREASON\tDETAIL")
			seen := map[string]bool{}
			recovered, foreign := 0, 0
			var next []byte
			for {
				resp, err := tc.ListWorkflow(cmd.Context(), &workflowservice.ListWorkflowExecutionsRequest{
					Namespace: cfg.Temporal.Namespace, Query: query, NextPageToken: next,
				})
				if err != nil {
					return fmt.Errorf("listing dead letters: %w", err)
				}
				for _, e := range resp.Executions {
					workflowID := e.GetExecution().GetWorkflowId()
					accountID, jobID, ok := workflows.ParseJobWorkflowID(workflowID)
					if !ok || seen[workflowID] {
						continue // not a job's workflow, or an earlier run of a re-driven job
					}
					seen[workflowID] = true
					// A closed run keeps the search attributes it closed with; the ledger says
					// whether a late result or a redrive has recovered the job since.
					job, err := ledger.Job(cmd.Context(), ledgerdb.JobKey{AccountID: accountID, JobID: jobID})
					if errors.Is(err, ledgerdb.ErrJobNotFound) {
						// Another ledger's job in the same namespace (the tests' database, say).
						foreign++
						continue
					}
					if err != nil {
						return err
					}
					if job.State != ledgerdb.StateRefunded && !all {
						recovered++
						continue
					}
					closed := "open"
					if e.GetCloseTime() != nil {
						closed = e.GetCloseTime().AsTime().UTC().Format("2006-01-02 15:04:05")
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", jobID, job.AccountID, job.State, e.GetStatus(), closed,
						job.RefundReason, ledgerdb.ScrubText(job.RefundDetail))
				}
				if next = resp.NextPageToken; len(next) == 0 {
					break
				}
			}
			_ = w.Flush()
			if recovered > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "(%d more were dead letters once and have left the ledger's refunded state since; --all lists them)\n", recovered)
			}
			if foreign > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "(%d dead-lettered workflows in this namespace belong to jobs this ledger does not know)\n", foreign)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "re-drive one with: jobbill job redrive JOB_ID --account ACCOUNT\n")
			return nil
		}),
	}
	list.Flags().StringVar(&account, "account", "", "only this account's dead letters")
	list.Flags().BoolVar(&all, "all", false, "also list jobs that were dead letters and have been recovered or deleted since")
	dlq.AddCommand(list)
	return dlq
}
