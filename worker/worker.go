// Package worker builds the Temporal client and worker that run jobbill's metered job workflows
// and their activities, from one [Config], and runs them until told to stop.
package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/metrics"
	"github.com/jobbill/jobbill/starter"
	"github.com/jobbill/jobbill/workflows"
)

// Dial connects a Temporal client as the configuration says, logging through z. With metrics, the
// SDK's own metrics (workflow and activity task latencies, failures, polls) join jobbill's.
func Dial(ctx context.Context, c Config, z *zap.Logger, m ...*metrics.Metrics) (client.Client, error) {
	opts := client.Options{
		HostPort:  c.Temporal.Address,
		Namespace: c.Temporal.Namespace,
		Logger:    SDKLogger(z),
	}
	if len(m) > 0 && m[0] != nil {
		opts.MetricsHandler = m[0].SDKHandler()
	}
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connecting to Temporal at %s: %w", c.Temporal.Address, err)
	}
	return tc, nil
}

// NewStarter is the starter of a configuration, over a client and ledger the caller owns.
func NewStarter(c Config, tc client.Client, ledger *ledgerdb.Store, m ...*metrics.Metrics) *starter.Starter {
	var recorder starter.ResultRecorder
	if len(m) > 0 && m[0] != nil {
		recorder = m[0]
	}
	return starter.New(starter.Options{
		Metrics:   recorder,
		Temporal:  tc,
		Ledger:    ledger,
		TaskQueue: c.Temporal.TaskQueue,
		Namespace: c.Temporal.Namespace,
		UIURL:     c.Temporal.UIURL,
		Policy:    c.Policy.WorkflowPolicy(),
	})
}

// New builds a worker that polls the configured task queue with the metered job workflow, the
// late-result fallback, the orphan-repair Reconcile workflow and the activities registered (the
// reconcile pass only with a starter, which it resumes placeholders through). Late results of the simulated runner are
// reported through st.
func New(c Config, tc client.Client, ledger *ledgerdb.Store, st *starter.Starter, m ...*metrics.Metrics) sdkworker.Worker {
	w := sdkworker.New(tc, c.Temporal.TaskQueue, sdkworker.Options{})
	w.RegisterWorkflow(workflows.MeteredJob)
	w.RegisterWorkflow(workflows.LateResult)
	acts := &activities.Activities{Ledger: ledger, Runner: newRunner(c.Runner, st)}
	if len(m) > 0 && m[0] != nil {
		acts.Metrics = m[0]
	}
	w.RegisterActivity(acts)
	// Orphan repair: the Reconcile workflow (run by the schedule EnsureReconcileSchedule creates)
	// heals placeholders through the starter's Resume, the same start path as a submission.
	w.RegisterWorkflow(workflows.Reconcile)
	if st != nil {
		w.RegisterActivity(&activities.Reconciler{Ledger: ledger, Healer: healer{st}})
	}
	return w
}

// healer lets the reconcile pass heal through the starter.
type healer struct{ st *starter.Starter }

func (h healer) Resume(ctx context.Context, jobID string) (ledgerdb.State, ledgerdb.RejectReason, error) {
	status, err := h.st.Resume(ctx, jobID)
	return status.State, ledgerdb.RejectReason(status.Reason), err
}

func (h healer) HealRunning(ctx context.Context, jobs []ledgerdb.Job) (int, []string, error) {
	report, err := h.st.HealRunning(ctx, jobs)
	return report.Healed, report.Failures, err
}

func (h healer) ApplyRecordedResult(ctx context.Context, u ledgerdb.UnappliedResult) error {
	return h.st.ApplyRecordedResult(ctx, u)
}

// EnsureReconcileSchedule creates the Temporal Schedule that runs the Reconcile workflow every
// reconcile.interval on the configured task queue, skipping a run while the previous one is still
// going, or, when it exists, points it at this configuration: the task queue, the interval and the
// grace. Every worker calls it at start, so a fleet ends up with exactly one schedule, and a
// deployment that moves to a new task queue takes the schedule with it (a schedule left pointing
// at a queue nobody polls would silently switch healing off; `jobbill audit` reports one). A
// paused schedule stays paused.
func EnsureReconcileSchedule(ctx context.Context, tc client.Client, c Config) error {
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: c.Reconcile.Interval}}}
	action := &client.ScheduleWorkflowAction{
		ID:        workflows.ReconcileWorkflowID,
		Workflow:  workflows.Reconcile,
		Args:      []any{activities.ReconcileInput{Grace: c.Reconcile.Grace}},
		TaskQueue: c.Temporal.TaskQueue,
		// A pass that outlives its slot is skipped over anyway; this bounds a stuck one.
		WorkflowRunTimeout: 15 * time.Minute,
	}
	_, err := tc.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      workflows.ReconcileScheduleID,
		Spec:    spec,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action:  action,
		Note:    "jobbill's reconcile pass: applies results recorded while Temporal was unreachable, heals jobs whose workflow ended unsettled, resumes orphaned placeholders",
	})
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		if err != nil {
			return fmt.Errorf("creating the reconcile schedule %q: %w", workflows.ReconcileScheduleID, err)
		}
		return nil
	}
	err = tc.ScheduleClient().GetHandle(ctx, workflows.ReconcileScheduleID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			schedule := in.Description.Schedule
			schedule.Spec, schedule.Action = &spec, action
			if schedule.Policy == nil {
				schedule.Policy = &client.SchedulePolicies{}
			}
			schedule.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
			return &client.ScheduleUpdate{Schedule: &schedule}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("updating the reconcile schedule %q: %w", workflows.ReconcileScheduleID, err)
	}
	return nil
}

func newRunner(c RunnerConfig, reporter activities.LateResultReporter) activities.Runner {
	if c.Kind == "http" {
		// Late results of a real GPU service come back through its own call to jobbill, and
		// through the reporter when the runner itself saw the success too late.
		return &activities.HTTPRunner{
			BaseURL:      c.HTTP.URL,
			PollInterval: c.HTTP.PollInterval,
			Client:       &http.Client{Timeout: c.HTTP.RequestTimeout},
			Reporter:     reporter,
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
	m := metrics.New()
	defer func() { _ = m.Close() }()
	_, stopMetrics, err := ServeMetrics(ctx, c.Metrics.Listen, m, z)
	if err != nil {
		return err
	}
	defer stopMetrics()
	tc, err := Dial(ctx, c, z, m)
	if err != nil {
		return err
	}
	defer tc.Close()
	w := New(c, tc, ledger, NewStarter(c, tc, ledger, m), m)
	if err := EnsureReconcileSchedule(ctx, tc, c); err != nil {
		return err
	}
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

// ServeMetrics serves m's Prometheus page at /metrics on addr until the returned stop is called,
// and says where it listens (addr may use port 0); an empty addr serves nothing.
func ServeMetrics(ctx context.Context, addr string, m *metrics.Metrics, z *zap.Logger) (bound string, stop func(), err error) {
	if addr == "" {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics.listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	z.Info("metrics listening", zap.String("address", ln.Addr().String()))
	return ln.Addr().String(), func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}, nil
}
