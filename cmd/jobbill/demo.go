package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/ledgerdb"
)

func newDemoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Play the stories against the ledger and print every row",
		Long: `Plays, on a fresh demo account, the stories the ledger exists for: a job delivered on the
first try; a job that times out, is refunded, and whose result then lands (the refund is
reclaimed, once, however often it is reported); a job refused for insufficient credits; and a
deleted job whose ID can never be charged again. Each run uses new IDs, so it can be repeated.`,
		Args: cobra.NoArgs,
		RunE: withStore(func(cmd *cobra.Command, store *ledgerdb.Store, _ []string) error {
			return playLedgerDemo(cmd.Context(), store, cmd.OutOrStdout())
		}),
	}
}

func playLedgerDemo(ctx context.Context, store *ledgerdb.Store, out io.Writer) error {
	run := time.Now().UTC().Format("20060102-150405")
	account := "demo-" + run
	job := func(name string) string { return fmt.Sprintf("%s-%s", name, run) }
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	step := func(what string, t ledgerdb.Transition, err error) error {
		switch {
		case errors.Is(err, ledgerdb.ErrInsufficientCredits), errors.Is(err, ledgerdb.ErrGone):
			say("  %-44s -> refused: %v", what, err)
			return nil
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		}
		say("  %-44s -> %-15s state %-10s money %s", what, t.Outcome, t.Job.State, t.Job.MoneyState())
		return nil
	}
	submit := func(id string, cost int64) error {
		t, err := store.Submit(ctx, ledgerdb.Submission{JobID: id, AccountID: account, Cost: cost, Request: []byte(`{"demo":true}`)})
		return step(fmt.Sprintf("submit %s (%d credits)", id, cost), t, err)
	}

	if _, err := store.OpenAccount(ctx, account); err != nil {
		return err
	}
	if _, err := store.Grant(ctx, ledgerdb.Credit{AccountID: account, Amount: 100, Key: "welcome", Memo: "demo credits"}); err != nil {
		return err
	}
	say("account %s granted 100 credits", account)

	say("\n(a) delivered on the first try")
	a := job("render-a")
	if err := submit(a, 40); err != nil {
		return err
	}
	t, err := store.Charge(ctx, a)
	if err := step("charge", t, err); err != nil {
		return err
	}
	t, err = store.Reclaim(ctx, a)
	if err := step("reclaim (success path; nothing was refunded)", t, err); err != nil {
		return err
	}
	t, err = store.Deliver(ctx, a, 1)
	if err := step("deliver", t, err); err != nil {
		return err
	}

	say("\n(b) every attempt times out, refunded; then the result lands late")
	b := job("render-b")
	if err := submit(b, 40); err != nil {
		return err
	}
	t, err = store.Charge(ctx, b)
	if err := step("charge", t, err); err != nil {
		return err
	}
	for _, what := range []string{"refund: timed out after 3 attempts", "refund again (a duplicate failure signal)"} {
		t, err = store.Refund(ctx, b, "timed out after 3 attempts", 3)
		if err := step(what, t, err); err != nil {
			return err
		}
	}
	for _, what := range []string{"reclaim: the result landed", "reclaim again (the result reported twice)"} {
		t, err = store.Reclaim(ctx, b)
		if err := step(what, t, err); err != nil {
			return err
		}
	}

	say("\n(c) insufficient credits: rejected, nothing charged")
	c := job("render-c")
	if err := submit(c, 500); err != nil {
		return err
	}
	t, err = store.Charge(ctx, c)
	if err := step("charge", t, err); err != nil {
		return err
	}

	say("\n(d) a deleted job's ID is burnt")
	t, err = store.Delete(ctx, a)
	if err := step("delete "+a, t, err); err != nil {
		return err
	}
	if err := submit(a, 40); err != nil {
		return err
	}

	h, err := store.History(ctx, account, ledgerdb.HistoryPage{})
	if err != nil {
		return err
	}
	say("\nledger rows of %s:", account)
	say("  %-6s %-8s %8s %8s  %s", "ROW", "KIND", "AMOUNT", "BALANCE", "JOB")
	for _, e := range h.Entries {
		say("  %-6d %-8s %+8d %8d  %s", e.ID, e.Kind, e.Amount, e.BalanceAfter, e.JobID)
	}
	report, err := store.Audit(ctx, account)
	if err != nil {
		return err
	}
	say("\nbalance %d = sum of rows %d; %d jobs audited", report.Balance, report.EntrySum, report.Jobs)
	if !report.OK() {
		return fmt.Errorf("audit found violations: %v", report.Violations)
	}
	say("audit: every money rule holds")
	return nil
}
