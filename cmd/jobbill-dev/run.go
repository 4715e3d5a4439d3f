package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/app"
	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/internal/stories"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/worker"
)

func newRunCommand() *cobra.Command {
	var exitAfter bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a worker and play the nine stories against it; keep running until Ctrl-C",
		Long: `Migrates the ledger (as the owner, migrate_database_url), starts a worker in this process
that connects as the application role (database_url) with webhook delivery beside it, as
jobbill worker does, serves the API and its web console on api.listen (a free port when it is
taken), grants a fresh account credits, and plays nine jobs through the job service with the
simulated runner (package internal/stories), at a price list it sets (render 40 credits a job;
gpu-render 1 credit a GPU-second, at most 300):
  (a) success on the first try
  (b) every attempt times out -> refunded -> the result lands late -> recovered
  (c) every attempt fails -> refunded and dead-lettered for good
  (d) the same result signalled twice -> delivered once
  (e) insufficient credits -> rejected, nothing charged
  (f) metered: 300 credits held, 137 GPU-seconds used -> 137 charged, 163 returned
  (g) metered: timed out -> refunded -> the result lands late with 90 GPU-seconds -> recovered,
      settled at 90
  (h) a promotional block expires while a metered job that drew from it waits for its late
      result -> the reclaim draws from the paid credits, settled at 60
  (i) an automatic top-up, on an account of its own: a render takes the balance from 120 to 80,
      below its rule's 100 -> a signed topup.requested webhook reaches a local receiver, whose
      payment code posts the grant of 420 under the event's key, pending, then settles it paid;
      its first answer is lost, the event is delivered again -> the same grant, balance 500
It prints each job's ledger rows, the balances and each workflow's link in the Temporal UI, then
prints a key of the demo account and an admin key to sign in to the console with, and keeps the
worker running until Ctrl-C (or exits after the stories, with --exit). Ctrl-C or SIGTERM, at any
step, stops what the run started and exits 0: a stop asked for is no failure. Postgres and the
Temporal dev server must be running: make run starts both first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cli.LoadConfig()
			if err != nil {
				return err
			}
			stories.Configure(&cfg)
			// The stories' output is for people; the worker's log goes to a file beside it.
			if err := os.MkdirAll(".dev", 0o755); err != nil {
				return err
			}
			logger, err := connect.NewLogger(config.Log{Level: "info", Format: "console", Output: runLogFile})
			if err != nil {
				return err
			}
			return stopOnSignal(cmd.Context(), run(cmd.Context(), cfg, logger, cmd.OutOrStdout(), exitAfter), cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&exitAfter, "exit", false, "stop the worker and exit once the stories are told")
	return cmd
}

// stopOnSignal answers how a run ends that ctx's signal (Ctrl-C's SIGINT, or SIGTERM) stopped: run
// has stopped what it started by then, so the stop the person asked for is a clean end — said on
// out, and nil, so that the command exits 0 and make does not report the run as failed — whatever
// step the signal cut short, and whatever that step answered. A run the signal did not stop
// answers its own err.
func stopOnSignal(ctx context.Context, err error, out io.Writer) error {
	if ctx.Err() == nil {
		return err
	}
	if err != nil {
		fmt.Fprintln(out, "\nStopped before the run was done; what it had started (the worker, the API) has stopped.")
	} else {
		fmt.Fprintln(out, "\nStopped: the worker and the API have stopped.")
	}
	return nil
}

// runLogFile is where `jobbill-dev run` writes the worker's log.
const runLogFile = ".dev/jobbill-dev.log"

func run(ctx context.Context, cfg config.Config, logger *zap.Logger, out io.Writer, exitAfter bool) error {
	// Migrate as the owner, then run as the application role, as a deployment does.
	if err := ledgerdb.Migrate(ctx, cfg.MigrateDatabaseURL); err != nil {
		return err
	}
	conns, err := connect.Open(ctx, cfg, logger, true)
	if err != nil {
		return err
	}
	defer conns.Close()
	metricsAddr, stopMetrics, err := app.ServeMetrics(ctx, cfg.Metrics.Listen, conns.Metrics, logger)
	if err != nil {
		return fmt.Errorf("metrics.listen: %w", err)
	}
	defer stopMetrics()
	st := conns.Jobs()
	w := worker.New(cfg, conns.Temporal, conns.Ledger, st, conns.Metrics)
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting the worker: %w", err)
	}
	defer w.Stop()
	// The passes run on their schedules, as a deployed worker's do: story (h)'s promotional block
	// is removed by the expiry pass.
	if err := worker.EnsureSchedules(ctx, conns.Temporal, cfg); err != nil {
		return err
	}
	// Webhook delivery runs beside the worker, started as `jobbill worker` starts it: story (i)'s
	// product learns of its top-up from it.
	stopHooks := app.StartWebhooks(ctx, cfg, conns.Ledger, conns.Metrics, logger)
	defer stopHooks()
	// The API serves from the start, as `jobbill api` would beside the worker: story (i)'s product
	// calls it, and the console is on it afterwards.
	apiAddr, stopAPI, err := serveAPI(ctx, cfg, conns, logger, out)
	if err != nil {
		return err
	}
	defer stopAPI()

	timingOut := cfg
	timingOut.Policy = stories.TimeoutPolicy(cfg)
	played := stories.NewRun()
	if err := played.Play(ctx, stories.Services{Ledger: conns.Ledger, Jobs: st,
		TimingOut: connect.NewJobs(timingOut, conns.Temporal, conns.Ledger, conns.Metrics), API: "http://" + apiAddr}, out); err != nil {
		return err
	}
	if !exitAfter {
		if err := printConsoleKeys(ctx, conns, played.Account, apiAddr, out); err != nil {
			return err
		}
	}
	if metricsAddr != "" {
		fmt.Fprintf(out, "\nMetrics: http://%s/metrics (jobbill_charges_total, jobbill_refunds_total, jobbill_reclaims_total, ...)\n", metricsAddr)
	}
	if exitAfter {
		return nil
	}
	fmt.Fprintf(out, "\nThe worker keeps running (Ctrl-C stops it; its log is %s). Filter the UI by billing state, e.g. %s/namespaces/%s/workflows?query=BillingState%%3D%%22refunded%%22\n",
		runLogFile, cfg.Temporal.UIURL, cfg.Temporal.Namespace)
	<-ctx.Done()
	return nil
}

// serveAPI serves the API, and the web console under /console/, on api.listen — or, when that
// address is taken (another run, or a `jobbill api`), on a free port of 127.0.0.1, said on out —
// until the returned stop is called, and answers where it listens.
func serveAPI(ctx context.Context, cfg config.Config, conns *connect.Conns, logger *zap.Logger, out io.Writer) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		taken := err
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return "", nil, fmt.Errorf("api.listen %s: %w; and no free port: %w", cfg.API.Listen, taken, err)
		}
		fmt.Fprintf(out, "api.listen %s: %v; the API and its console are on http://%s for this run\n", cfg.API.Listen, taken, ln.Addr())
	}
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := app.NewAPI(cfg, conns, logger).Serve(ctx, ln); err != nil {
			logger.Warn("the development API stopped", zap.Error(err))
		}
	}()
	return ln.Addr().String(), func() {
		cancel()
		<-served
	}, nil
}

// printConsoleKeys prints the console's address and two keys to sign in with: the demo account's
// (customer_read, so the demo's money can be read but not spent) and an operator's. They are
// development keys of a development ledger, printed so that a person can paste one into the
// sign-in form.
func printConsoleKeys(ctx context.Context, conns *connect.Conns, account, apiAddr string, out io.Writer) error {
	keys := apikeys.NewStore(conns.Ledger.Pool())
	customer, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomerRead, AccountID: account, Name: "jobbill-dev run: the demo account"})
	if err != nil {
		return err
	}
	operator, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeAdmin, Name: "jobbill-dev run: the operator"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nConsole: http://%s/console/ — sign in with the demo account's key\n  %s\nor, for the operator's pages, with\n  %s\n",
		apiAddr, customer.Secret, operator.Secret)
	return nil
}
