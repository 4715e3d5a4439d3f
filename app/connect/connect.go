// Package connect connects a process to what it works with, from one config.Config: its logger,
// the Temporal client, the ledger, the metrics and the job service over them. It sits below the
// worker and the HTTP API, so that the processes (package app), the commands and the tests that
// run a worker of their own (worker/workertest) connect in one place without importing each other.
package connect

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/metrics"
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
