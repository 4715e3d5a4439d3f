package app

import (
	"context"
	"fmt"
	"io"
	"net"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/console"
	"github.com/jobbill/jobbill/webhooks"
)

// RunAPI serves the HTTP API as c says until ctx is done (SIGINT or SIGTERM in the binary), then
// stops taking requests and gives in-flight ones api.shutdown_timeout to finish. Its Prometheus page
// is served on the operator's listener, api.metrics_listen, never on the public api.listen. It says
// where it listens on out.
//
// It authenticates callers against the API keys in the ledger's database, read on every request,
// and the bootstrap admin keys of api.keys. It starts without bootstrap keys: `jobbill key create
// --scope admin` makes an admin key through the ledger, with no API to ask.
func RunAPI(ctx context.Context, c config.Config, z *zap.Logger, out io.Writer) error {
	conns, err := connect.Open(ctx, c, z, true)
	if err != nil {
		return err
	}
	defer conns.Close()
	srv := NewAPI(c, conns, z)
	metricsAddr, stopMetrics, err := ServeMetrics(ctx, c.API.MetricsListen, conns.Metrics, z)
	if err != nil {
		return fmt.Errorf("api.metrics_listen: %w", err)
	}
	defer stopMetrics()
	ln, err := net.Listen("tcp", c.API.Listen)
	if err != nil {
		return fmt.Errorf("api.listen %s: %w", c.API.Listen, err)
	}
	// The key count, never the keys.
	z.Info("api listening", zap.String("address", ln.Addr().String()), zap.Int("bootstrap_keys", len(c.API.Keys)),
		zap.String("task_queue", c.Temporal.TaskQueue))
	fmt.Fprintf(out, "jobbill console on http://%s/console/ (sign in with an API key)\n", ln.Addr())
	fmt.Fprintf(out, "jobbill api listening on http://%s (bootstrap admin keys in api.keys: %d; the other keys are in the ledger: jobbill key list)\n",
		ln.Addr(), len(c.API.Keys))
	if metricsAddr != "" {
		fmt.Fprintf(out, "jobbill api metrics on http://%s/metrics (operators only)\n", metricsAddr)
	}
	if err := srv.Serve(ctx, ln); err != nil {
		return err
	}
	z.Info("api stopped")
	return nil
}

// NewAPI is the HTTP API as `jobbill api` serves it over conns — with the web console mounted
// under /console/ — for RunAPI and for the development run (jobbill-dev run).
func NewAPI(c config.Config, conns *connect.Conns, z *zap.Logger) *api.Server {
	return api.New(api.Options{
		Config: c.API,
		Jobs:   conns.Jobs(),
		Ledger: conns.Ledger,
		// The same address rules the delivery worker applies when it sends.
		WebhookURLs: webhooks.URLPolicy{AllowPrivate: c.Webhooks.AllowPrivateURLs},
		Ready: []api.Check{
			{Name: "postgres", Probe: conns.Ledger.Pool().Ping},
			{Name: "temporal", Probe: func(ctx context.Context) error {
				_, err := conns.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
				return err
			}},
		},
		Logger:  z,
		Metrics: conns.Metrics,
		// The web console, on the same listener under /console/, limited per session (a page view
		// counts once) and, before a session, per address at the API's rate.
		Console: console.New(console.Options{Jobs: conns.Jobs(), Ledger: conns.Ledger,
			RequestTimeout: c.API.RequestTimeout, Logger: z,
			SessionRate: c.API.ConsoleRateLimit, AddressRate: c.API.RateLimit}),
	})
}
