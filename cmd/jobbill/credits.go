package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/ledgerdb"
)

// newBlocksCommand is `jobbill account blocks`: an account's credit blocks in the order a charge
// spends them.
func newBlocksCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "blocks ACCOUNT",
		Short: "Print an account's credit blocks in the order a charge spends them",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			blocks, err := store.Blocks(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			now := time.Now()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "BLOCK\tCATEGORY\tPRIORITY\tAMOUNT\tREMAINING\tEFFECTIVE\tEXPIRES\tCOST BASIS\tSTATUS\tSPENDABLE\tMEMO")
			for _, b := range blocks {
				expires := "never"
				if b.ExpiresAt != nil {
					expires = b.ExpiresAt.UTC().Format(time.RFC3339)
				}
				if b.ExpiredAt != nil {
					expires += " (expired)"
				}
				status := string(b.Status)
				if b.Opening {
					status += ", opening"
				}
				fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%t\t%s\n", b.ID, b.Category, b.Priority, b.Amount, b.Remaining,
					b.EffectiveAt.UTC().Format(time.RFC3339), expires, orDash(b.CostBasis), status, b.Spendable(now), b.Memo)
			}
			return w.Flush()
		}),
	}
}

// periodFlags reads --from and --to: RFC 3339 times or dates (midnight UTC), to exclusive.
func periodFlags(from, to string) (time.Time, time.Time, error) {
	start, err := ledgerdb.ParseInstant("--from", from)
	if err != nil {
		return start, start, err
	}
	end, err := ledgerdb.ParseInstant("--to", to)
	if err != nil {
		return start, end, err
	}
	return start, end, ledgerdb.ValidatePeriod(start, end)
}

// addPeriodFlags adds the required --from and --to of a period to cmd.
func addPeriodFlags(cmd *cobra.Command, from, to *string) {
	cmd.Flags().StringVar(from, "from", "", "the period's start, included: RFC 3339 or a date (required)")
	cmd.Flags().StringVar(to, "to", "", "the period's end, excluded: RFC 3339 or a date (required)")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
}

// newStatementCommand is `jobbill account statement`: what an account's money did over a period.
func newStatementCommand() *cobra.Command {
	var from, to string
	var asCSV bool
	cmd := &cobra.Command{
		Use:   "statement ACCOUNT --from FROM --to TO",
		Short: "Print an account's statement of a period: opening balance, lines by kind, closing balance",
		Long: `Print what an account's money did from --from (included) to --to (excluded), each an RFC 3339
time or a date (2026-01-02, midnight UTC): the opening balance, the period's rows summed by kind
(grants by block category, charges by job kind, then refunds, reclaims, releases, adjustments and
expiries) and the closing balance, which is the opening plus the lines. --csv prints the CSV the
API and the console hand out.`,
		Args: cobra.ExactArgs(1),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			start, end, err := periodFlags(from, to)
			if err != nil {
				return err
			}
			st, err := store.Statement(cmd.Context(), args[0], start, end)
			if err != nil {
				return err
			}
			if asCSV {
				return ledgerdb.WriteStatementCSV(cmd.OutOrStdout(), st)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "account %s, %s to %s (%s)\n", st.AccountID, st.From.Format(time.RFC3339), st.To.Format(time.RFC3339), st.Status())
			fmt.Fprintf(w, "opening balance\t\t%d\n", st.Opening)
			for _, line := range st.Lines {
				fmt.Fprintf(w, "%s\t%d rows\t%+d\n", line.Label(), line.Rows, line.Amount)
			}
			fmt.Fprintf(w, "closing balance\t\t%d\n", st.Closing)
			return w.Flush()
		}),
	}
	addPeriodFlags(cmd, &from, &to)
	cmd.Flags().BoolVar(&asCSV, "csv", false, "print the statement as CSV")
	return cmd
}

// newRevenueCommand is `jobbill revenue`: the operators' report of paid credits recognised,
// deferred and lapsed over a period.
func newRevenueCommand() *cobra.Command {
	var from, to, account string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revenue --from FROM --to TO",
		Short: "Print the revenue report of paid credits over a period: recognised, deferred, lapsed",
		Long: `Print what paid credits did from --from (included) to --to (excluded), each an RFC 3339 time or a
date, valued at their blocks' cost basis: deferred while a block or a running job holds them,
recognised when the job that drew them is delivered or recovered (net of its refund and release;
a refunded job is never revenue), lapsed when their block expires with them. Deferred at the start +
granted − recognised − lapsed + adjusted = deferred at the end. Promotional credits delivered work
spent are reported apart: never revenue. Every account, or one with --account.`,
		Args: cobra.NoArgs,
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, _ []string) error {
			start, end, err := periodFlags(from, to)
			if err != nil {
				return err
			}
			r, err := store.Revenue(cmd.Context(), start, end, account)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(cmd.OutOrStdout(), "paid credits, %s to %s, at cost basis\n", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339))
			fmt.Fprintln(w, "\tCREDITS\tAMOUNT\t")
			for _, row := range []struct {
				name string
				m    ledgerdb.Money
			}{{"deferred at start", r.DeferredOpening}, {"+ granted", r.Granted}, {"− recognised", r.Recognised},
				{"− lapsed", r.Lapsed}, {"+ adjusted", r.Adjusted}, {"= deferred at end", r.DeferredClosing}} {
				fmt.Fprintf(w, "%s\t%d\t%s\t\n", row.name, row.m.Credits, row.m.Amount)
			}
			fmt.Fprintf(w, "promotional spent (not revenue)\t%d\t\t\n", r.PromotionalSpent)
			return w.Flush()
		}),
	}
	addPeriodFlags(cmd, &from, &to)
	cmd.Flags().StringVar(&account, "account", "", "only this account's blocks")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
