package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/metrics"
	"github.com/jobbill/jobbill/starter"
	"github.com/jobbill/jobbill/worker"
)

// devPolicy makes the stories take seconds rather than the GPU defaults' minutes: 3 attempts of
// at most 3 s, 1 s then 2 s apart, and 2 minutes to wait for a late result.
func devPolicy(c worker.Config) worker.Config {
	c.Policy.InitialInterval = time.Second
	c.Policy.BackoffCoefficient = 2
	c.Policy.MaximumInterval = 5 * time.Second
	c.Policy.MaximumAttempts = 3
	c.Policy.StartToClose = 3 * time.Second
	c.Policy.HeartbeatTimeout = 2 * time.Second
	c.Policy.LateResultWindow = 2 * time.Minute
	c.Runner.Simulated.Duration = time.Second
	return c
}

func newDevCommand() *cobra.Command {
	var exitAfter bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the worker and play the five stories against it; keep running until Ctrl-C",
		Long: `Migrates the ledger (as the owner, migrate_database_url), starts a worker in this process
that connects as the application role (database_url), grants a fresh demo account credits, and
submits five jobs through the starter with the simulated runner:
  (a) success on the first try
  (b) every attempt times out -> refunded -> the result lands late -> recovered
  (c) every attempt fails -> refunded and dead-lettered for good
  (d) the same result signalled twice -> delivered once
  (e) insufficient credits -> rejected, nothing charged
It prints each job's ledger rows, the balance and each workflow's link in the Temporal UI, then
keeps the worker running until Ctrl-C (or exits, with --exit). Postgres and the Temporal dev
server must be running: make run starts both first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			cfg = devPolicy(cfg)
			// The stories' output is for people; the worker's log goes to a file beside it.
			if err := os.MkdirAll(".dev", 0o755); err != nil {
				return err
			}
			logger, err := worker.NewLogger(worker.LogConfig{Level: "info", Format: "console", Output: devLogFile})
			if err != nil {
				return err
			}
			return runDev(cmd.Context(), cfg, logger, cmd.OutOrStdout(), exitAfter)
		},
	}
	cmd.Flags().BoolVar(&exitAfter, "exit", false, "stop the worker and exit once the stories are told")
	return cmd
}

// devLogFile is where `jobbill dev` writes the worker's log.
const devLogFile = ".dev/jobbill-dev.log"

func runDev(ctx context.Context, cfg worker.Config, logger *zap.Logger, out io.Writer, exitAfter bool) error {
	// Migrate as the owner, then run as the application role, as a deployment does.
	if err := ledgerdb.Migrate(ctx, cfg.MigrateDatabaseURL); err != nil {
		return err
	}
	ledger, err := ledgerdb.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer ledger.Close()
	m := metrics.New()
	defer func() { _ = m.Close() }()
	metricsAddr, stopMetrics, err := worker.ServeMetrics(ctx, cfg.Metrics.Listen, m, logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	tc, err := worker.Dial(ctx, cfg, logger, m)
	if err != nil {
		return err
	}
	defer tc.Close()
	st := worker.NewStarter(cfg, tc, ledger, m)
	w := worker.New(cfg, tc, ledger, st, m)
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting the worker: %w", err)
	}
	defer w.Stop()

	if err := playStories(ctx, ledger, st, out); err != nil {
		return err
	}
	if metricsAddr != "" {
		fmt.Fprintf(out, "\nMetrics: http://%s/metrics (jobbill_charges_total, jobbill_refunds_total, jobbill_reclaims_total, ...)\n", metricsAddr)
	}
	if exitAfter {
		return nil
	}
	fmt.Fprintf(out, "\nThe worker keeps running (Ctrl-C stops it; its log is %s). Filter the UI by billing state, e.g. %s/namespaces/%s/workflows?query=BillingState%%3D%%22refunded%%22\n",
		devLogFile, cfg.Temporal.UIURL, cfg.Temporal.Namespace)
	<-ctx.Done()
	return nil
}

// story is one of the demo's jobs and how its end is reached.
type story struct {
	name, title string
	cost        int64
	input       string
	// then runs after the charge is decided, to report results as the story needs.
	then func(ctx context.Context, st *starter.Starter, jobID string) error
	// ends are the states the story waits for.
	ends []ledgerdb.State
}

func playStories(ctx context.Context, ledger *ledgerdb.Store, st *starter.Starter, out io.Writer) error {
	run := time.Now().UTC().Format("20060102-150405")
	account := "demo-" + run
	if _, err := ledger.OpenAccount(ctx, account); err != nil {
		return err
	}
	if _, err := ledger.Grant(ctx, ledgerdb.Credit{AccountID: account, Amount: 200, Key: "welcome", Memo: "demo credits"}); err != nil {
		return err
	}
	fmt.Fprintf(out, "account %s granted 200 credits; playing five stories (about 20 seconds)\n", account)

	reportTwice := func(ctx context.Context, st *starter.Starter, jobID string) error {
		// Two reports of the same result race each other, as a duplicated callback would.
		res := activities.WorkResult{Attempt: 1, OutputRef: "sim://" + jobID + "/callback", FinishedAt: time.Now().UTC()}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = st.ReportResult(ctx, jobID, res)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	stories := []story{
		{name: "a", title: "success on the first try", cost: 40, input: "sim:ok", ends: []ledgerdb.State{ledgerdb.StateDelivered}},
		{name: "b", title: "every attempt times out, refunded, then the result lands late", cost: 40, input: "sim:late:3", ends: []ledgerdb.State{ledgerdb.StateRecovered}},
		{name: "c", title: "every attempt fails: refunded and dead-lettered for good", cost: 40, input: "sim:fail", ends: []ledgerdb.State{ledgerdb.StateRefunded}},
		{name: "d", title: "the same result signalled twice", cost: 40, input: "sim:hang", then: reportTwice, ends: []ledgerdb.State{ledgerdb.StateDelivered}},
		{name: "e", title: "insufficient credits: rejected, nothing charged", cost: 10_000, input: "sim:ok", ends: []ledgerdb.State{ledgerdb.StateRejected}},
	}
	final := make([]starter.Status, len(stories))
	errs := make([]error, len(stories))
	var wg sync.WaitGroup
	for i, s := range stories {
		wg.Add(1)
		go func() {
			defer wg.Done()
			final[i], errs[i] = playStory(ctx, st, account, run, s)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	history, err := ledger.History(ctx, account, ledgerdb.HistoryPage{Limit: 1000})
	if err != nil {
		return err
	}
	for i, s := range stories {
		status := final[i]
		fmt.Fprintf(out, "\n(%s) %s\n    job %s: %s, money %s, %d attempts\n    %s\n    %s\n",
			s.name, s.title, status.JobID, status.State, status.MoneyState, status.Attempts, status.Message, status.WorkflowURL)
		for _, e := range history.Entries {
			if e.JobID == status.JobID {
				fmt.Fprintf(out, "      row %-6d %-8s %+6d  balance after %d\n", e.ID, e.Kind, e.Amount, e.BalanceAfter)
			}
		}
		if len(s.ends) > 0 && status.State != s.ends[0] {
			return fmt.Errorf("story (%s) ended %s, not %s", s.name, status.State, s.ends[0])
		}
	}
	report, err := ledger.Audit(ctx, account)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nbalance of %s: %d credits = the sum of its %d ledger rows (%d)\n", account, report.Balance, report.Entries, report.EntrySum)
	if !report.OK() {
		return fmt.Errorf("audit found violations: %v", report.Violations)
	}
	fmt.Fprintln(out, "audit: every money rule holds")
	return nil
}

func playStory(ctx context.Context, st *starter.Starter, account, run string, s story) (starter.Status, error) {
	jobID := fmt.Sprintf("%s-%s", s.name, run)
	_, err := st.Submit(ctx, starter.Job{ID: jobID, AccountID: account, Cost: s.cost, InputRef: s.input})
	if err != nil && !errors.Is(err, ledgerdb.ErrInsufficientCredits) {
		return starter.Status{}, fmt.Errorf("story (%s): %w", s.name, err)
	}
	if s.then != nil {
		if err := s.then(ctx, st, jobID); err != nil {
			return starter.Status{}, fmt.Errorf("story (%s): %w", s.name, err)
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	status, err := st.Wait(waitCtx, jobID, s.ends...)
	if err != nil {
		return status, fmt.Errorf("story (%s): %w", s.name, err)
	}
	return status, nil
}
