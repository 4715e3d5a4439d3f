package workerbench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/webhooks"
)

// WebhookRun is the result-signal-to-reclaim latency measured again with webhook delivery on — each
// of the run's accounts has an endpoint (a receiver in this process), and a delivery worker with
// the default configuration sends every event of the measured jobs while they run — and then off
// once more, so that the machine's drift over the run shows beside the difference.
type WebhookRun struct {
	// Latency is the result-signal-to-reclaim latency with delivery on.
	Latency Latency
	// OffAfter is the same latency measured after it, with delivery off again (the endpoints
	// deleted, the worker stopped).
	OffAfter Latency
	// Delivered is how many events the receiver took.
	Delivered int64
	// LagP50 and LagP99 are the time from an event's commit to its delivery (the delivery log's
	// attempt time), nearest-rank.
	LagP50, LagP99 time.Duration
}

// withWebhooks gives every account of the run an endpoint, starts a delivery worker for them, and
// measures the latency again (its jobs' IDs say "hooked"); then it waits until every delivery is
// done, measures how long deliveries took, deletes the endpoints, stops the worker and measures
// the latency once more (IDs "unhooked"). The measurements with delivery off ran with no endpoint,
// so they differ from the one with it on only by delivery: the events are written either way.
func (b *bench) withWebhooks(ctx context.Context) (WebhookRun, error) {
	var run WebhookRun
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return run, err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		atomic.AddInt64(&run.Delivered, 1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	cfg := config.Default().Webhooks
	cfg.AllowPrivateURLs = true // the receiver is on loopback
	store := webhooks.NewStore(b.ledger.Pool())
	for _, acct := range b.accounts {
		if _, err := store.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: "http://" + ln.Addr().String() + "/hooks",
			Description: "workerbench " + b.runID}, webhooks.URLPolicy{AllowPrivate: true}); err != nil {
			return run, fmt.Errorf("webhook endpoint for %s: %w", acct, err)
		}
	}
	hookCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = webhooks.NewWorker(webhooks.Options{Store: store, PollInterval: cfg.PollInterval, BatchSize: cfg.BatchSize, AllowPrivateURLs: true, Accounts: b.accounts}).Run(hookCtx)
	}()
	stopWorker := func() { stop(); <-done }
	defer stopWorker()

	fmt.Fprintf(b.out, "webhooks on: %d endpoints, delivery poll %s, batch %d\n", len(b.accounts), cfg.PollInterval, cfg.BatchSize)
	if run.Latency, err = b.latency(ctx, "hooked"); err != nil {
		return run, err
	}

	// Every delivery done, then the lag of each from the delivery log. Events are derived after
	// their transitions commit: every one derived first, so that none is still to be queued.
	if err := store.CatchUp(ctx); err != nil {
		return run, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var pending int
		if err := b.ledger.Pool().QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
			WHERE e.account_id = ANY($1) AND d.status = 'pending'`, b.accounts).Scan(&pending); err != nil {
			return run, err
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			return run, fmt.Errorf("webhooks: %d deliveries still pending after 2 minutes", pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rows, err := b.ledger.Pool().Query(ctx, `SELECT extract(epoch FROM a.attempted_at - ev.created_at) * 1e6 FROM webhook_attempts a
		JOIN webhook_events ev ON ev.seq = a.event_seq JOIN webhook_endpoints e ON e.id = a.endpoint_id
		WHERE e.account_id = ANY($1) AND a.outcome = 'delivered'`, b.accounts)
	if err != nil {
		return run, err
	}
	var lags []time.Duration
	for rows.Next() {
		var micros float64
		if err := rows.Scan(&micros); err != nil {
			rows.Close()
			return run, err
		}
		lags = append(lags, time.Duration(micros)*time.Microsecond)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return run, err
	}
	if len(lags) > 0 {
		slices.Sort(lags)
		run.LagP50, run.LagP99 = rank(lags, 0.50), rank(lags, 0.99)
	}

	for _, acct := range b.accounts {
		eps, err := store.Endpoints(ctx, acct)
		if err != nil {
			return run, err
		}
		for _, ep := range eps {
			if _, _, err := store.DeleteEndpoint(ctx, acct, ep.ID); err != nil {
				return run, err
			}
		}
	}
	stopWorker()
	fmt.Fprintf(b.out, "webhooks off again: endpoints deleted, delivery stopped\n")
	run.OffAfter, err = b.latency(ctx, "unhooked")
	return run, err
}

// printWebhooks prints the latency with delivery off and on side by side.
func (b *bench) printWebhooks(res Result) {
	if !b.cfg.Webhooks || res.Webhooks.Latency.Jobs == 0 {
		return
	}
	off, on, after := res.Latency, res.Webhooks.Latency, res.Webhooks.OffAfter
	fmt.Fprintf(b.out, "result signal -> reclaim row, webhook delivery off / on / off, in the order measured:\n")
	fmt.Fprintf(b.out, "  off  n=%d  p50 %s  p99 %s\n", off.Jobs, ms(off.P50), ms(off.P99))
	fmt.Fprintf(b.out, "  on   n=%d  p50 %s  p99 %s  (%d events delivered; commit -> delivery p50 %s  p99 %s)\n",
		on.Jobs, ms(on.P50), ms(on.P99), atomic.LoadInt64(&res.Webhooks.Delivered), ms(res.Webhooks.LagP50), ms(res.Webhooks.LagP99))
	fmt.Fprintf(b.out, "  off  n=%d  p50 %s  p99 %s\n", after.Jobs, ms(after.P50), ms(after.P99))
}
