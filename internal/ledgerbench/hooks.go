package ledgerbench

// The lifecycles whose accounts have endpoints: a local receiver, and a delivery worker deriving
// the events from the ledger's rows and delivering them through the rounds, as `jobbill worker`
// does beside the money path. The money path itself writes the same on accounts with endpoints as
// on accounts without; what endpoints cost is the worker's share of the machine, which the
// figures of these lifecycles include, and how long after a round its events have all arrived.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/webhooks"
)

// hooks is the receiver the endpoints point at and what a delivery worker needs.
type hooks struct {
	// url is every endpoint's URL: the receiver, under the run's prefix.
	url    string
	secret string
	srv    *http.Server
	// received counts the deliveries the receiver took.
	received atomic.Int64
	store    *webhooks.Store
	pool     *pgxpool.Pool
	// accounts are every account with an endpoint, both sides: the worker claims only theirs.
	accounts []string
}

// newHooks starts the receiver on a loopback port: it takes every delivery (204), as a customer's
// receiver that stores the event and answers would.
func newHooks(pool *pgxpool.Pool, prefix string) (*hooks, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ledgerbench: webhook receiver: %w", err)
	}
	h := &hooks{url: "http://" + ln.Addr().String() + "/" + prefix, secret: webhooks.NewSecret(), store: webhooks.NewStore(pool), pool: pool}
	h.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h.received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *hooks) close() { _ = h.srv.Close() }

// addEndpoints gives each of the accounts an endpoint at the receiver, in the set-up's
// transaction.
func (h *hooks) addEndpoints(ctx context.Context, tx pgx.Tx, accounts []string) error {
	h.accounts = append(h.accounts, accounts...)
	_, err := tx.Exec(ctx, `INSERT INTO webhook_endpoints (id, account_id, url, secret, description)
		SELECT 'we_' || md5(a), a, $2, $3, 'ledgerbench receiver' FROM unnest($1::text[]) a`, accounts, h.url, h.secret)
	return err
}

// during runs a round (f) while a delivery worker derives and delivers with the default settings,
// then waits until every event of the round has been derived and delivered, and answers how long
// that took after the round ended.
func (h *hooks) during(ctx context.Context, f func() (Figures, error)) (Figures, error) {
	workerCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = webhooks.NewWorker(webhooks.Options{Store: h.store, AllowPrivateURLs: true, Accounts: h.accounts}).Run(workerCtx)
	}()
	defer func() { stop(); <-done }()

	fig, err := f()
	if err != nil {
		return fig, err
	}
	ended := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := h.store.CatchUp(ctx); err != nil {
		return fig, fmt.Errorf("ledgerbench: deriving the round's webhook events: %w", err)
	}
	for {
		var pending int
		if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
			WHERE d.status = 'pending' AND e.url = $1`, h.url).Scan(&pending); err != nil {
			return fig, fmt.Errorf("ledgerbench: waiting for the round's webhook deliveries: %w", err)
		}
		if pending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fig, fmt.Errorf("ledgerbench: %d webhook deliveries still pending: %w", pending, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	fig.Drain = time.Since(ended)
	return fig, nil
}

// verifyEvents checks that every lifecycle of a side with endpoints made its three events, each
// delivered once to its account's endpoint: an event exists exactly when its money row does, and
// is delivered at least once. It answers how many there are. The accounts' own events (the
// funding grant's credit.granted, when a pass reads it after the endpoint exists) are not the
// lifecycles' and are not counted.
func (b *bench) verifyEvents(ctx context.Context, side string, lc *lifecycle, wantJobs int) (int, error) {
	var evs, delivered, rows int
	err := b.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM webhook_events ev WHERE starts_with(ev.account_id, $1) AND ev.job_id IS NOT NULL),
		       (SELECT count(*) FROM webhook_events ev JOIN webhook_deliveries d ON d.event_seq = ev.seq AND d.status = 'delivered'
		        WHERE starts_with(ev.account_id, $1) AND ev.job_id IS NOT NULL),
		       (SELECT count(*) FROM ledger_entries e WHERE starts_with(e.account_id, $1) AND e.kind IN ('charge', 'refund', 'reclaim'))`,
		b.accountsPrefix(side, lc)).Scan(&evs, &delivered, &rows)
	if err != nil {
		return 0, fmt.Errorf("ledgerbench: verifying the %s events of side %s: %w", lc.label(), side, err)
	}
	if want := events * wantJobs; evs != want || delivered != want || rows != want {
		return 0, fmt.Errorf("ledgerbench: EVENT CHECK FAILED on the %s accounts of side %s: want %d events, one per charge, refund and reclaim row (%d), each delivered; found %d events, %d delivered",
			lc.label(), side, want, rows, evs, delivered)
	}
	return evs, nil
}
