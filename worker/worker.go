// Package worker builds the Temporal client and worker that run jobbill's metered job workflows
// and their activities, from one [Config], and runs them until told to stop.
package worker

import (
	"context"
	"fmt"
	"net/http"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/starter"
	"github.com/jobbill/jobbill/workflows"
)

// Dial connects a Temporal client as the configuration says, logging through z.
func Dial(ctx context.Context, c Config, z *zap.Logger) (client.Client, error) {
	tc, err := client.DialContext(ctx, client.Options{
		HostPort:  c.Temporal.Address,
		Namespace: c.Temporal.Namespace,
		Logger:    SDKLogger(z),
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to Temporal at %s: %w", c.Temporal.Address, err)
	}
	return tc, nil
}

// NewStarter is the starter of a configuration, over a client and ledger the caller owns.
func NewStarter(c Config, tc client.Client, ledger *ledgerdb.Store) *starter.Starter {
	return starter.New(starter.Options{
		Temporal:  tc,
		Ledger:    ledger,
		TaskQueue: c.Temporal.TaskQueue,
		Namespace: c.Temporal.Namespace,
		UIURL:     c.Temporal.UIURL,
		Policy:    c.Policy.WorkflowPolicy(),
	})
}

// New builds a worker that polls the configured task queue with the metered job workflow, the
// late-result fallback and the activities registered. Late results of the simulated runner are
// reported through st.
func New(c Config, tc client.Client, ledger *ledgerdb.Store, st *starter.Starter) sdkworker.Worker {
	w := sdkworker.New(tc, c.Temporal.TaskQueue, sdkworker.Options{})
	w.RegisterWorkflow(workflows.MeteredJob)
	w.RegisterWorkflow(workflows.LateResult)
	w.RegisterActivity(&activities.Activities{Ledger: ledger, Runner: newRunner(c.Runner, st)})
	return w
}

func newRunner(c RunnerConfig, reporter activities.LateResultReporter) activities.Runner {
	if c.Kind == "http" {
		// Late results of a real GPU service come back through its own call to jobbill.
		return &activities.HTTPRunner{
			BaseURL:      c.HTTP.URL,
			PollInterval: c.HTTP.PollInterval,
			Client:       &http.Client{Timeout: c.HTTP.RequestTimeout},
		}
	}
	return &activities.SimulatedRunner{
		Duration:    c.Simulated.Duration,
		FailureRate: c.Simulated.FailureRate,
		Seed:        c.Simulated.Seed,
		LateBy:      c.Simulated.LateBy,
		Reporter:    reporter,
	}
}

// Run connects to the ledger and Temporal, runs a worker until ctx is done (SIGINT or SIGTERM in
// the binary), then stops it cleanly: in-flight activities get the worker's stop timeout to finish.
func Run(ctx context.Context, c Config, z *zap.Logger) error {
	ledger, err := ledgerdb.Open(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer ledger.Close()
	tc, err := Dial(ctx, c, z)
	if err != nil {
		return err
	}
	defer tc.Close()
	w := New(c, tc, ledger, NewStarter(c, tc, ledger))
	z.Info("worker starting", zap.String("task_queue", c.Temporal.TaskQueue), zap.String("temporal", c.Temporal.Address))
	if err := w.Run(stopOn(ctx)); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	z.Info("worker stopped")
	return nil
}

// stopOn turns a context into the interrupt channel the SDK's Worker.Run waits on.
func stopOn(ctx context.Context) <-chan any {
	ch := make(chan any, 1)
	go func() {
		<-ctx.Done()
		ch <- struct{}{}
	}()
	return ch
}
