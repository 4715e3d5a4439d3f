// Package app wires jobbill's parts together from one config.Config: the logger, the ledger, the
// Temporal client, the metrics, the job service, the worker and the HTTP API. The commands and the
// tests build on it, so that each part is wired in one place.
package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/metrics"
	"github.com/jobbill/jobbill/webhooks"
	"github.com/jobbill/jobbill/worker"
)

// Dial connects a Temporal client as the configuration says, logging through z. With metrics
// (m not nil), the SDK's own metrics (workflow and activity task latencies, failures, polls) join
// jobbill's.
func Dial(ctx context.Context, c config.Config, z *zap.Logger, m *metrics.Metrics) (client.Client, error) {
	tc, err := client.DialContext(ctx, clientOptions(c, z, m))
	if err != nil {
		return nil, fmt.Errorf("connecting to Temporal at %s: %w", c.Temporal.Address, err)
	}
	return tc, nil
}

// clientOptions are the Temporal client's options of a configuration.
func clientOptions(c config.Config, z *zap.Logger, m *metrics.Metrics) client.Options {
	return client.Options{
		HostPort:       c.Temporal.Address,
		Namespace:      c.Temporal.Namespace,
		Logger:         SDKLogger(z),
		MetricsHandler: m.SDKHandler(),
	}
}

// NewJobs is the job service of a configuration, over a client and ledger the caller owns; m may
// be nil.
func NewJobs(c config.Config, tc client.Client, ledger *ledgerdb.Store, m *metrics.Metrics) *jobs.Service {
	opts := jobs.Options{
		Temporal:  tc,
		Ledger:    ledger,
		TaskQueue: c.Temporal.TaskQueue,
		Namespace: c.Temporal.Namespace,
		UIURL:     c.Temporal.UIURL,
		Policy:    c.Policy.WithDefaults(),
	}
	if m != nil {
		opts.Metrics = m
	}
	return jobs.New(opts)
}

// Conns are what a process works with: its configuration and logger, and the ledger, Temporal
// and metrics it opened.
type Conns struct {
	// Config is the configuration they were opened with.
	Config config.Config
	// Logger is the process's logger.
	Logger *zap.Logger
	// Ledger is the ledger, as the application role.
	Ledger *ledgerdb.Store
	// Temporal is the Temporal client.
	Temporal client.Client
	// Metrics records jobbill's counters and the SDK's; nil when opened without.
	Metrics *metrics.Metrics
}

// Open connects to the ledger and to Temporal as c says, with metrics when withMetrics. Close
// releases what it opened.
func Open(ctx context.Context, c config.Config, z *zap.Logger, withMetrics bool) (*Conns, error) {
	conns := &Conns{Config: c, Logger: z}
	if withMetrics {
		conns.Metrics = metrics.New()
	}
	var err error
	if conns.Ledger, err = ledgerdb.Open(ctx, c.DatabaseURL); err != nil {
		conns.Close()
		return nil, err
	}
	if conns.Temporal, err = Dial(ctx, c, z, conns.Metrics); err != nil {
		conns.Close()
		return nil, err
	}
	return conns, nil
}

// OpenForCommand connects to the ledger as c says, and makes a Temporal client that connects on
// its first call: what a one-shot command (`jobbill job ...`) works with. Every such command does
// its ledger part first — a reported result is recorded before it is signalled, a status is read
// from the ledger before it is healed — so Temporal being unreachable must not stop it before
// that part: the command answers what the ledger did ("recorded"; the ledger's state stands) and
// the reconcile pass does the rest once Temporal answers.
func OpenForCommand(ctx context.Context, c config.Config, z *zap.Logger) (*Conns, error) {
	conns := &Conns{Config: c, Logger: z}
	var err error
	if conns.Ledger, err = ledgerdb.Open(ctx, c.DatabaseURL); err != nil {
		return nil, err
	}
	if conns.Temporal, err = client.NewLazyClient(clientOptions(c, z, nil)); err != nil {
		conns.Close()
		return nil, fmt.Errorf("a client of Temporal at %s: %w", c.Temporal.Address, err)
	}
	return conns, nil
}

// Jobs is the job service over the connections.
func (c *Conns) Jobs() *jobs.Service {
	return NewJobs(c.Config, c.Temporal, c.Ledger, c.Metrics)
}

// Close closes what Open opened.
func (c *Conns) Close() {
	if c.Temporal != nil {
		c.Temporal.Close()
	}
	if c.Ledger != nil {
		c.Ledger.Close()
	}
	if c.Metrics != nil {
		_ = c.Metrics.Close()
	}
}

// RunWorker runs a worker as c says until ctx is done (SIGINT or SIGTERM in the binary), then
// stops it cleanly: in-flight activities get the worker's stop timeout to finish. It serves the
// metrics page on metrics.listen and creates or updates the reconcile schedule first.
func RunWorker(ctx context.Context, c config.Config, z *zap.Logger) error {
	conns, err := Open(ctx, c, z, true)
	if err != nil {
		return err
	}
	defer conns.Close()
	_, stopMetrics, err := ServeMetrics(ctx, c.Metrics.Listen, conns.Metrics, z)
	if err != nil {
		return fmt.Errorf("metrics.listen: %w", err)
	}
	defer stopMetrics()
	w := worker.New(c, conns.Temporal, conns.Ledger, conns.Jobs(), conns.Metrics)
	if err := worker.EnsureReconcileSchedule(ctx, conns.Temporal, c); err != nil {
		return err
	}
	z.Info("worker starting", zap.String("task_queue", c.Temporal.TaskQueue), zap.String("temporal", c.Temporal.Address))
	stopHooks := startWebhooks(ctx, c, conns.Ledger, conns.Metrics, z)
	defer stopHooks()
	if err := w.Run(stopOn(ctx)); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	z.Info("worker stopped")
	return nil
}

// startWebhooks runs the webhook delivery worker beside the Temporal worker when
// webhooks.enabled, until ctx is done or the returned stop is called; stop waits for the attempts
// in flight to be recorded. With webhooks off it starts nothing: events stay queued in the ledger
// until a process with them on delivers them.
func startWebhooks(ctx context.Context, c config.Config, ledger *ledgerdb.Store, m *metrics.Metrics, z *zap.Logger) (stop func()) {
	if !c.Webhooks.Enabled {
		z.Info("webhook delivery is off (webhooks.enabled)")
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = webhooks.NewWorker(webhooks.NewStore(ledger.Pool()), c.Webhooks, z.Named("webhooks")).WithMetrics(m).Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
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
// and says where it listens (addr may use port 0); an empty addr serves nothing. It is the one
// place a process serves its metrics: the worker on metrics.listen, the API on the operator's
// api.metrics_listen (never on its public port).
func ServeMetrics(ctx context.Context, addr string, m *metrics.Metrics, z *zap.Logger) (bound string, stop func(), err error) {
	if addr == "" {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listening for /metrics on %s: %w", addr, err)
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
