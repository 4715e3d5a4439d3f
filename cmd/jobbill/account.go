package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/plural"
)

func newAccountCommand() *cobra.Command {
	account := &cobra.Command{
		Use:   "account",
		Short: "Open, top up and inspect accounts",
	}
	account.AddCommand(
		&cobra.Command{
			Use:   "open ACCOUNT",
			Short: "Open an account with a zero balance (idempotent)",
			Args:  cobra.ExactArgs(1),
			RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
				outcome, err := store.OpenAccount(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "account %s: %s\n", args[0], outcome)
				return nil
			}),
		},
		newGrantCommand(),
		&cobra.Command{
			Use:   "balance ACCOUNT",
			Short: "Print an account's balance in credits",
			Args:  cobra.ExactArgs(1),
			RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
				balance, err := store.Balance(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d\n", balance)
				return nil
			}),
		},
		newHistoryCommand(),
		newSettleGrantCommand(),
		newTopUpRuleCommand(),
		newBlocksCommand(),
		newStatementCommand(),
		newAccountAuditCommand(),
	)
	return account
}

func newGrantCommand() *cobra.Command {
	var key, memo, category, effectiveAt, expiresAt, costBasis string
	var priority int32
	var pending bool
	cmd := &cobra.Command{
		Use:   "grant ACCOUNT CREDITS --key KEY",
		Short: "Top an account up with a credit block, once per key",
		Long: `Top an account up with a credit block of the given terms, once per key: the same key again
with the same credits and terms answers already_applied; with others, a conflict. Promotional
credits are spent before paid ones and are never revenue; within a category a lower priority is
spent first. Times are RFC 3339; a cost basis is what the customer paid per credit ("0.01"),
paid blocks only. Bad terms are refused naming the term, with nothing written. With --pending the
grant waits for its payment, holding nothing, until "jobbill account settle-grant" says it was
paid (or failed).`,
		Args: cobra.ExactArgs(2),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			amount, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil {
				return fmt.Errorf("credits %q: a whole number of credits is needed", args[1])
			}
			terms := ledgerdb.BlockTerms{Category: ledgerdb.BlockCategory(category), Priority: priority, CostBasis: costBasis}
			if terms.EffectiveAt, err = timeFlag("effective-at", effectiveAt); err != nil {
				return err
			}
			if terms.ExpiresAt, err = timeFlag("expires-at", expiresAt); err != nil {
				return err
			}
			p, err := store.Grant(cmd.Context(), ledgerdb.Credit{AccountID: args[0], Amount: amount, Key: key, Memo: memo, Block: terms, Pending: pending})
			if err != nil {
				return err
			}
			if pending && p.EntryID == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "grant %s of %d to %s: %s, pending its payment (no credits yet; balance %d)\n", key, amount, args[0], p.Outcome, p.BalanceAfter)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "grant %s of %d to %s: %s (row %d, balance %d)\n", key, amount, args[0], p.Outcome, p.EntryID, p.BalanceAfter)
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&key, "key", "", "idempotency key: the same key grants once (required)")
	f.StringVar(&memo, "memo", "", "note kept on the ledger row")
	f.StringVar(&category, "category", "paid", "the block's category: paid or promotional")
	f.Int32Var(&priority, "priority", 0, "within a category, a lower priority is spent first")
	f.StringVar(&effectiveAt, "effective-at", "", "when the credits become spendable, RFC 3339 (default: at once)")
	f.StringVar(&expiresAt, "expires-at", "", "when what remains of the block expires, RFC 3339 (default: never)")
	f.StringVar(&costBasis, "cost-basis", "", `what the customer paid per credit, a decimal such as "0.01" (paid blocks only)`)
	f.BoolVar(&pending, "pending", false, "the payment is not confirmed yet: the block holds nothing until settle-grant")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

// timeFlag reads an optional RFC 3339 time flag; nil when not given.
func timeFlag(name, value string) (*time.Time, error) {
	if value == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: an RFC 3339 time such as 2027-01-02T00:00:00Z is needed; nothing was written", name, value)
	}
	return &t, nil
}

func newHistoryCommand() *cobra.Command {
	var page ledgerdb.HistoryPage
	cmd := &cobra.Command{
		Use:   "history ACCOUNT",
		Short: "Print a page of an account's ledger rows, oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			h, err := store.History(cmd.Context(), args[0], page)
			if err != nil {
				return err
			}
			printEntries(cmd, h.Entries)
			if h.NextAfterID != 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "more: --after %d\n", h.NextAfterID)
			}
			return nil
		}),
	}
	cmd.Flags().Int64Var(&page.AfterID, "after", 0, "show rows after this row ID (from the previous page)")
	cmd.Flags().IntVar(&page.Limit, "limit", 100, "rows per page (at most 1000)")
	return cmd
}

func printEntries(cmd *cobra.Command, entries []ledgerdb.Entry) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ROW\tKIND\tAMOUNT\tBALANCE\tJOB\tKEY\tAT")
	for _, e := range entries {
		fmt.Fprintf(w, "%d\t%s\t%+d\t%d\t%s\t%s\t%s\n", e.ID, e.Kind, e.Amount, e.BalanceAfter, e.JobID, e.Key, e.CreatedAt.UTC().Format("15:04:05.000"))
	}
	_ = w.Flush()
}

func newAccountAuditCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "audit ACCOUNT",
		Short: "Replay an account's ledger against its balance and its jobs' states; exit 1 on any violation",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			report, err := store.Audit(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(report); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "account %s: balance %d, rows sum to %d, %s, %s\n",
					report.AccountID, report.Balance, report.EntrySum, plural.Count(report.Entries, "row"), plural.Count(report.Jobs, "job"))
				for _, v := range report.Violations {
					fmt.Fprintln(cmd.OutOrStdout(), "VIOLATION:", v)
				}
			}
			if !report.OK() {
				return fmt.Errorf("account %s: %d violations of the money rules", report.AccountID, len(report.Violations))
			}
			if !asJSON {
				fmt.Fprintln(cmd.OutOrStdout(), "ok: every money rule holds")
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
