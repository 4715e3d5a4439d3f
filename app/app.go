// Package app runs jobbill's processes from one config.Config: the worker (with the webhook
// delivery worker beside it) and the HTTP API, each serving its metrics page. It connects them
// through package connect, which the commands and the tests that need no whole process use
// directly.
package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/metrics"
	"github.com/jobbill/jobbill/webhooks"
	"github.com/jobbill/jobbill/worker"
)

// RunWorker runs a worker as c says until ctx is done (SIGINT or SIGTERM in the binary), then
// stops it cleanly: in-flight activities get the worker's stop timeout to finish. It serves the
// metrics page on metrics.listen and creates or updates the schedules of the reconcile and expiry
// passes first.
func RunWorker(ctx context.Context, c config.Config, z *zap.Logger) error {
	conns, err := connect.Open(ctx, c, z, true)
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
	if err := worker.EnsureSchedules(ctx, conns.Temporal, c); err != nil {
		return err
	}
	z.Info("worker starting", zap.String("task_queue", c.Temporal.TaskQueue), zap.String("temporal", c.Temporal.Address))
	stopHooks := StartWebhooks(ctx, c, conns.Ledger, conns.Metrics, z)
	defer stopHooks()
	if err := w.Run(stopOn(ctx)); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	z.Info("worker stopped")
	return nil
}

// StartWebhooks runs the webhook delivery worker beside the Temporal worker when
// webhooks.enabled, until ctx is done or the returned stop is called; stop waits for the attempts
// in flight to be recorded. With webhooks off it starts nothing: the ledger's rows wait, and the
// events are derived and delivered once a process with them on runs. It is the one way a process
// starts delivery: RunWorker's, and the development run's (jobbill-dev run).
func StartWebhooks(ctx context.Context, c config.Config, ledger *ledgerdb.Store, m *metrics.Metrics, z *zap.Logger) (stop func()) {
	if !c.Webhooks.Enabled {
		z.Info("webhook delivery is off (webhooks.enabled)")
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = webhooks.NewWorker(WebhookOptions(c.Webhooks, ledger, z.Named("webhooks"), m)).Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// WebhookOptions are the delivery worker's options as the configuration's webhooks.* settings say,
// on the ledger's pool.
func WebhookOptions(c config.Webhooks, ledger *ledgerdb.Store, z *zap.Logger, m *metrics.Metrics) webhooks.Options {
	return webhooks.Options{
		Store:            webhooks.NewStore(ledger.Pool()),
		PollInterval:     c.PollInterval,
		Timeout:          c.Timeout,
		MaxAge:           c.MaxAge,
		InitialBackoff:   c.InitialBackoff,
		MaxBackoff:       c.MaxBackoff,
		BatchSize:        c.BatchSize,
		AllowPrivateURLs: c.AllowPrivateURLs,
		Log:              z,
		Metrics:          m,
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
