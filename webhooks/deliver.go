package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/metrics"
)

// Options configure a delivery worker, as the webhooks.* settings of the configuration say
// (docs/configuration.md). A zero field takes the default named beside it.
type Options struct {
	// Store is the webhook store the worker derives, claims and records through. Required.
	Store *Store
	// PollInterval is how often an idle worker looks for new transitions and due deliveries
	// (1s).
	PollInterval time.Duration
	// Timeout bounds one attempt: connecting, sending and reading the answer (10s).
	Timeout time.Duration
	// MaxAge is how long a delivery is retried, from when it could first be sent, before it is
	// given up (72h).
	MaxAge time.Duration
	// InitialBackoff is the wait before the second attempt (5s); each later wait doubles, up to
	// MaxBackoff (1h), with jitter.
	InitialBackoff, MaxBackoff time.Duration
	// BatchSize is how many deliveries one round claims and sends at once (20).
	BatchSize int
	// AllowPrivateURLs lets receivers sit on internal addresses and use plain http; for
	// development and tests only (see [URLPolicy]).
	AllowPrivateURLs bool
	// Log receives the worker's log lines; nil logs nothing.
	Log *zap.Logger
	// Metrics counts the attempts (jobbill_webhook_attempts_total{outcome}); nil counts nothing.
	Metrics *metrics.Metrics
	// Accounts, when not empty, limits the worker's claims to these accounts' endpoints, for tests
	// that share one ledger with other tests' workers (as the reconcile pass's account filters).
	// The derive pass is the ledger's and serves every account whatever this says.
	Accounts []string
}

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.PollInterval, time.Second)
	def(&o.Timeout, 10*time.Second)
	def(&o.MaxAge, 72*time.Hour)
	def(&o.InitialBackoff, 5*time.Second)
	def(&o.MaxBackoff, time.Hour)
	if o.BatchSize <= 0 {
		o.BatchSize = 20
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return o
}

// Worker derives events from the ledger's rows and delivers them to their endpoints. Each round it
// runs one derive pass (ledger_webhook_derive: the events of the transitions committed since the
// last pass, for accounts with endpoints, queued for delivery; one pass at a time among all
// workers), then claims due deliveries (a lease, so that several workers, in one process or many,
// never send the same delivery at once), POSTs each signed with its endpoint's secret, and records
// the attempt — delivered on a 2xx answer, otherwise due again after an exponential backoff with
// jitter, or failed once the retry would come more than max age after the delivery could first be
// sent (queued, or its job's earlier event at the endpoint delivered or given up). Delivery is at
// least once: a worker that dies after sending and before recording leaves the delivery to be sent
// again when its lease runs out, under the same webhook-id; one that dies mid-pass leaves the
// cursor where it was, and the next pass reads the same transactions again.
type Worker struct {
	store  *Store
	opts   Options
	policy URLPolicy
	client *http.Client
	log    *zap.Logger
	// now is the clock the signature's timestamp is taken from.
	now func() time.Time
}

// NewWorker is a delivery worker configured by opts.
func NewWorker(opts Options) *Worker {
	opts = opts.withDefaults()
	policy := URLPolicy{AllowPrivate: opts.AllowPrivateURLs}
	transport := &http.Transport{
		DialContext:           policy.dialer(),
		TLSHandshakeTimeout:   opts.Timeout,
		ResponseHeaderTimeout: opts.Timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	client := &http.Client{
		Transport: transport,
		Timeout:   opts.Timeout,
		// A redirect would send the signed event where the customer's URL did not say, possibly
		// inside jobbill's network: it counts as a failed attempt instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Worker{store: opts.Store, opts: opts, policy: policy, client: client, log: opts.Log, now: time.Now}
}

// Run delivers until ctx is done, then lets the attempts in flight finish and record themselves
// (each is bounded by the timeout) before it returns: a stop never leaves a sent event unrecorded
// by choice.
func (w *Worker) Run(ctx context.Context) error {
	w.log.Info("webhook delivery starting", zap.Duration("poll_interval", w.opts.PollInterval), zap.Int("batch_size", w.opts.BatchSize))
	for {
		n, more, err := w.round(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("webhook delivery round failed", zap.Error(err))
		}
		if ctx.Err() != nil {
			w.log.Info("webhook delivery stopped")
			return nil
		}
		if more || n == w.opts.BatchSize {
			continue // more may be waiting right now
		}
		select {
		case <-ctx.Done():
			w.log.Info("webhook delivery stopped")
			return nil
		case <-time.After(w.opts.PollInterval):
		}
	}
}

// RunOnce runs one derive pass, then claims one batch of due deliveries, sends them at once and
// records each attempt, and answers how many it claimed.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	n, _, err := w.round(ctx)
	return n, err
}

// round is RunOnce, also saying whether the derive pass left transactions for another pass.
func (w *Worker) round(ctx context.Context) (claimed int, more bool, err error) {
	_, more, deriveErr := w.store.Derive(ctx, derivePass)
	if deriveErr != nil && ctx.Err() == nil {
		// Deliveries already queued still go out; the next round derives again.
		w.log.Warn("webhook derive pass failed", zap.Error(deriveErr))
	}
	batch, err := w.claim(ctx)
	if err != nil {
		return 0, more, err
	}
	var wg sync.WaitGroup
	for _, d := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Detached from ctx: an attempt under way finishes and is recorded, within the
			// timeout, even when the worker is told to stop.
			w.deliver(context.WithoutCancel(ctx), d)
		}()
	}
	wg.Wait()
	return len(batch), more, nil
}

// delivery is one claimed delivery with what it takes to send it.
type delivery struct {
	endpointID string
	eventSeq   int64
	token      uuid.UUID
	attempt    int
	queuedAt   time.Time
	eventID    string
	eventType  string
	payload    json.RawMessage
	createdAt  time.Time
	url        string
	secret     string
}

// derivePass is how many transactions one derive pass reads at most: a pass is one transaction
// of its own, cheap per row, so it takes many at once; a backlog (after a stop, or a transaction
// held open) is read in passes of this size, back to back.
const derivePass = 1000

// lease is how long a claim holds a delivery: long enough for one attempt and its record, so that
// another worker takes it over only when this one is gone.
func (w *Worker) lease() time.Duration { return 2*w.opts.Timeout + 30*time.Second }

func (w *Worker) claim(ctx context.Context) ([]delivery, error) {
	rows, err := w.store.pool.Query(ctx, `SELECT endpoint_id, event_seq, lease_token, attempt, queued_at, event_id, event_type,
			payload, event_created_at, url, secret FROM ledger_webhook_claim($1, $2, $3)`, w.opts.BatchSize, w.lease(), w.opts.Accounts)
	if err != nil {
		return nil, fmt.Errorf("claiming webhook deliveries: %w", err)
	}
	defer rows.Close()
	var out []delivery
	for rows.Next() {
		var d delivery
		if err := rows.Scan(&d.endpointID, &d.eventSeq, &d.token, &d.attempt, &d.queuedAt, &d.eventID, &d.eventType,
			&d.payload, &d.createdAt, &d.url, &d.secret); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Body is what a delivery POSTs, the Standard Webhooks envelope: the event's type, when its
// transition committed, and its payload. It is the same bytes on every attempt.
type Body struct {
	// Type is the event's type (job.charged …, balance.low, credit.granted, credit.expired,
	// topup.requested).
	Type string `json:"type"`
	// Timestamp is when the event's transition was made (its transaction's time), RFC 3339.
	Timestamp time.Time `json:"timestamp"`
	// Data is the event's payload.
	Data json.RawMessage `json:"data"`
}

// maxErrorLength bounds the error text kept in the delivery log.
const maxErrorLength = 300

// deliver sends one delivery and records the attempt.
func (w *Worker) deliver(ctx context.Context, d delivery) {
	start := time.Now()
	status, sendErr := w.send(ctx, d)
	took := time.Since(start)
	delivered := sendErr == nil && status >= 200 && status < 300
	var httpStatus *int
	if status != 0 {
		httpStatus = &status
	}
	var errText *string
	switch {
	case sendErr != nil:
		s := sendErr.Error()
		if len(s) > maxErrorLength {
			s = s[:maxErrorLength]
		}
		errText = &s
	case !delivered:
		s := fmt.Sprintf("the receiver answered %d; a 2xx answer is needed", status)
		errText = &s
	}
	retryIn := w.backoff(d.attempt)
	var outcome string
	err := w.store.pool.QueryRow(ctx, `SELECT ledger_webhook_record_attempt($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		d.endpointID, d.eventSeq, d.token, d.attempt, delivered, httpStatus, errText, int(took.Milliseconds()), retryIn, w.opts.MaxAge).
		Scan(&outcome)
	log := w.log.With(zap.String("endpoint", d.endpointID), zap.String("event", d.eventID), zap.String("type", d.eventType),
		zap.Int("attempt", d.attempt), zap.Int("http_status", status))
	if err != nil {
		outcome = "not_recorded"
	}
	w.opts.Metrics.WebhookAttempt(outcome, took)
	switch {
	case err != nil:
		// The lease runs out and the delivery is sent again: at least once.
		log.Warn("webhook attempt not recorded; it will be sent again", zap.Error(err))
	case outcome == "failed":
		log.Warn("webhook delivery failed for good: given up after max age", zap.Stringp("error", errText), zap.Duration("max_age", w.opts.MaxAge))
	case outcome == "retry":
		log.Info("webhook attempt failed; retrying", zap.Stringp("error", errText), zap.Duration("retry_in", retryIn))
	default:
		log.Debug("webhook attempt recorded", zap.String("outcome", outcome))
	}
}

// send POSTs the delivery, signed now, and answers the receiver's status.
func (w *Worker) send(ctx context.Context, d delivery) (int, error) {
	// Checked again at send time: the policy may be stricter now than when the endpoint was made.
	if err := w.policy.Check(d.url); err != nil {
		return 0, err
	}
	body, err := json.Marshal(Body{Type: d.eventType, Timestamp: d.createdAt.UTC(), Data: d.payload})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "jobbill-webhooks/1")
	if err := Sign(req.Header, d.secret, d.eventID, w.now(), body); err != nil {
		return 0, err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			// "Post \"https://…\": dial tcp …" says the URL, which the log already names.
			return 0, ue.Unwrap()
		}
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// backoff is the wait after a failed attempt: InitialBackoff doubled for each attempt before it,
// capped at MaxBackoff, of which a random half is taken off (jitter), so that many deliveries
// failing together do not come back together.
func (w *Worker) backoff(attempt int) time.Duration {
	d := w.opts.InitialBackoff
	for i := 1; i < attempt && d < w.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, w.opts.MaxBackoff)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}
