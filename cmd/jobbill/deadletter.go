package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/worker"
	"github.com/jobbill/jobbill/workflows"
)

func newDeadLetterCommand() *cobra.Command {
	dlq := &cobra.Command{
		Use:     "dlq",
		Aliases: []string{"dead-letters"},
		Short:   "Read dead letters: jobs refunded because their work failed for good",
	}
	var account string
	list := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered jobs (open and closed workflows) with their ledger state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			logger, err := worker.NewLogger(worker.LogConfig{Level: "warn", Format: "console"})
			if err != nil {
				return err
			}
			tc, err := worker.Dial(cmd.Context(), cfg, logger)
			if err != nil {
				return err
			}
			defer tc.Close()
			query := fmt.Sprintf("WorkflowType = '%s' AND %s = true", workflows.WorkflowType, workflows.SearchAttributeDeadLettered)
			if account != "" {
				if err := ledgerdb.ValidateID("account ID", account); err != nil {
					return err
				}
				query += fmt.Sprintf(" AND %s = '%s'", workflows.SearchAttributeAccountID, account)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "JOB\tACCOUNT\tBILLING STATE\tWORKFLOW\tCLOSED AT")
			var next []byte
			for {
				resp, err := tc.ListWorkflow(cmd.Context(), &workflowservice.ListWorkflowExecutionsRequest{
					Namespace: cfg.Temporal.Namespace, Query: query, NextPageToken: next,
				})
				if err != nil {
					return fmt.Errorf("listing dead letters: %w", err)
				}
				for _, e := range resp.Executions {
					sa := e.GetSearchAttributes().GetIndexedFields()
					closed := "open"
					if e.GetCloseTime() != nil {
						closed = e.GetCloseTime().AsTime().UTC().Format("2006-01-02 15:04:05")
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", e.GetExecution().GetWorkflowId(),
						payloadText(sa[workflows.SearchAttributeAccountID].GetData()),
						payloadText(sa[workflows.SearchAttributeBillingState].GetData()),
						e.GetStatus(), closed)
				}
				if next = resp.NextPageToken; len(next) == 0 {
					break
				}
			}
			_ = w.Flush()
			fmt.Fprintf(cmd.OutOrStdout(), "re-drive one with: jobbill job redrive JOB_ID\n")
			return nil
		},
	}
	list.Flags().StringVar(&account, "account", "", "only this account's dead letters")
	dlq.AddCommand(list)
	return dlq
}

// payloadText shows a search attribute's JSON payload ("\"refunded\"") as plain text.
func payloadText(data []byte) string {
	if len(data) >= 2 && data[0] == '"' {
		return string(data[1 : len(data)-1])
	}
	return string(data)
}
