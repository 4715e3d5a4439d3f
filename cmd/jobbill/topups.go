package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/ledgerdb"
)

func newSettleGrantCommand() *cobra.Command {
	var paid, failed bool
	cmd := &cobra.Command{
		Use:   "settle-grant ACCOUNT KEY --paid|--failed",
		Short: "Settle the payment of a grant posted pending: its credits become spendable, or it is void",
		Long: `A grant posted with --pending holds nothing until its payment is settled: --paid writes the
grant's row and makes its credits spendable (paying the account's debt first); --failed voids its
block. The same settlement again answers already_applied; the other one is a conflict.`,
		Args: cobra.ExactArgs(2),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			if paid == failed {
				return errors.New("give --paid (the payment was made) or --failed (it failed), one of them; nothing was written")
			}
			p, err := store.SettlePendingGrant(cmd.Context(), args[0], args[1], paid)
			if err != nil {
				return err
			}
			if paid {
				fmt.Fprintf(cmd.OutOrStdout(), "grant %s to %s paid: %s (row %d, balance %d)\n", args[1], args[0], p.Outcome, p.EntryID, p.BalanceAfter)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "grant %s to %s void: %s (balance %d)\n", args[1], args[0], p.Outcome, p.BalanceAfter)
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&paid, "paid", false, "the payment was made")
	cmd.Flags().BoolVar(&failed, "failed", false, "the payment failed")
	return cmd
}

func newTopUpRuleCommand() *cobra.Command {
	rule := &cobra.Command{
		Use:   "topup-rule",
		Short: "Set, show or remove an account's automatic top-up rule",
		Long: `A debit that takes the balance from at or above the rule's threshold to below it raises one
topup.requested webhook event (the account needs an endpoint) asking for the rule's amount (mode
fixed) or what fills the balance up to it (mode target), never more than the monthly cap in a
calendar month (UTC). The payment code answers by posting the paid grant under the event's
idempotency key.`,
	}
	var mode string
	var threshold, amount, monthlyCap string
	set := &cobra.Command{
		Use:   "set ACCOUNT --threshold N --mode fixed|target --amount N --monthly-cap N",
		Short: "Set the rule, replacing any (idempotent)",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			r := ledgerdb.TopUpRule{AccountID: args[0], Mode: ledgerdb.TopUpMode(mode)}
			for _, f := range []struct {
				name, value string
				dst         *int64
			}{{"threshold", threshold, &r.Threshold}, {"amount", amount, &r.Amount}, {"monthly-cap", monthlyCap, &r.MonthlyCap}} {
				v, err := strconv.ParseInt(f.value, 10, 64)
				if err != nil {
					return fmt.Errorf("--%s %q: a whole number of credits is needed; nothing was written", f.name, f.value)
				}
				*f.dst = v
			}
			outcome, err := store.SetTopUpRule(cmd.Context(), r)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "top-up rule of %s: below %d, %s %d, at most %d a month (%s)\n",
				r.AccountID, r.Threshold, r.Mode, r.Amount, r.MonthlyCap, outcome)
			return nil
		}),
	}
	f := set.Flags()
	f.StringVar(&threshold, "threshold", "", "the balance below which a debit asks for a top-up (required)")
	f.StringVar(&mode, "mode", "", "fixed: ask for --amount; target: ask for what fills the balance up to --amount (required)")
	f.StringVar(&amount, "amount", "", "the credits asked for, or the target balance (required)")
	f.StringVar(&monthlyCap, "monthly-cap", "", "the most credits asked for in one calendar month (required)")
	for _, name := range []string{"threshold", "mode", "amount", "monthly-cap"} {
		_ = set.MarkFlagRequired(name)
	}
	show := &cobra.Command{
		Use:   "show ACCOUNT",
		Short: "Print the rule",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			if _, err := store.Balance(cmd.Context(), args[0]); err != nil {
				return err
			}
			r, ok, err := store.TopUpRuleOf(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(cmd.OutOrStdout(), "%s has no automatic top-up rule\n", args[0])
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "top-up rule of %s: below %d, %s %d, at most %d a month (set %s)\n",
				r.AccountID, r.Threshold, r.Mode, r.Amount, r.MonthlyCap, r.UpdatedAt.UTC().Format("2006-01-02 15:04 UTC"))
			return nil
		}),
	}
	remove := &cobra.Command{
		Use:   "remove ACCOUNT",
		Short: "Remove the rule (idempotent)",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			outcome, err := store.RemoveTopUpRule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "top-up rule of %s removed (%s)\n", args[0], outcome)
			return nil
		}),
	}
	rule.AddCommand(set, show, remove)
	return rule
}
