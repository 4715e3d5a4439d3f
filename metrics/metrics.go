// Package metrics exposes jobbill's own counters, and the Temporal SDK's metrics, to Prometheus.
//
// Both go through one tally scope with a Prometheus reporter (go.temporal.io/sdk/contrib/tally,
// as samples-go metrics/ does), so a process serves a single /metrics page. The HTTP API's metrics
// are registered with the same Prometheus registry directly: their label is a route pattern
// ("GET /v1/jobs/{id}"), which tally's sanitizer would flatten to "GET__v1_jobs__id_". Every method
// is safe on a nil *Metrics and then records nothing, so code that is not given metrics needs no
// checks.
package metrics

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/jobbill/jobbill/ledgerdb"
)

// Metrics records jobbill's counters and serves them with the SDK's.
type Metrics struct {
	scope        tally.Scope
	closer       io.Closer
	reporter     tallyprom.Reporter
	httpRequests *prom.CounterVec
	httpLatency  *prom.HistogramVec
}

// reportEvery is how often tally hands its values to the Prometheus registry.
const reportEvery = time.Second

// New starts a metrics scope with a registry of its own (two processes' worth in one test binary
// must not collide on the global registry).
func New() *Metrics {
	registry := prom.NewRegistry()
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       registry,
		DefaultTimerType: tallyprom.HistogramTimerType,
		// Ledger calls take milliseconds; the defaults start at a second's granularity.
		DefaultHistogramBuckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, reportEvery)
	m := &Metrics{scope: sdktally.NewPrometheusNamingScope(scope), closer: closer, reporter: reporter,
		httpRequests: prom.NewCounterVec(prom.CounterOpts{
			Name: HTTPRequests, Help: "The HTTP API's answers, by route pattern and status.",
		}, []string{"route", "status"}),
		httpLatency: prom.NewHistogramVec(prom.HistogramOpts{
			Name: HTTPLatency, Help: "How long the HTTP API took to answer, by route pattern.",
			// A submission waits for its charge decision up to api.request_timeout (30 s).
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
	}
	registry.MustRegister(m.httpRequests, m.httpLatency)
	return m
}

// SDKHandler is the Temporal client's metrics handler (client.Options.MetricsHandler).
func (m *Metrics) SDKHandler() client.MetricsHandler {
	if m == nil {
		return nil
	}
	return sdktally.NewMetricsHandler(m.scope)
}

// Handler serves the Prometheus page.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return m.reporter.HTTPHandler()
}

// Close flushes the last values.
func (m *Metrics) Close() error {
	if m == nil {
		return nil
	}
	return m.closer.Close()
}

// The names of jobbill's own metrics, as Prometheus shows them.
const (
	// Charges counts charges written (jobbill_charges_total).
	Charges = "jobbill_charges"
	// Refunds counts refunds written (jobbill_refunds_total).
	Refunds = "jobbill_refunds"
	// Reclaims counts refunds reclaimed after a late result (jobbill_reclaims_total).
	Reclaims = "jobbill_reclaims"
	// Settlements counts priced jobs settled at their usage (jobbill_settlements_total).
	Settlements = "jobbill_settlements"
	// ReleasedCredits counts the credits of holds returned by settlements, the part of each hold
	// the work did not use (jobbill_released_credits_total).
	ReleasedCredits = "jobbill_released_credits"
	// DeadLetters counts jobs refunded because their work failed for good (jobbill_dead_letters_total);
	// every applied refund is one.
	DeadLetters = "jobbill_dead_letters"
	// RejectedCharges counts charges refused for insufficient credits or a deleted ID
	// (jobbill_rejected_charges_total).
	RejectedCharges = "jobbill_rejected_charges"
	// GuardNoops counts guarded calls that wrote nothing because an earlier call had already
	// applied them, or they did not apply (jobbill_guard_noops_total{operation, outcome}).
	GuardNoops = "jobbill_guard_noops"
	// ResultsAfterClose counts results that landed after their job's workflow closed and went to the
	// fallback (jobbill_results_after_close_total{outcome}).
	ResultsAfterClose = "jobbill_results_after_close"
	// ExpiredBlocks counts credit blocks whose remaining credits the expiry pass removed
	// (jobbill_expired_blocks_total).
	ExpiredBlocks = "jobbill_expired_blocks"
	// ExpiredCredits counts the credits the expiry pass removed from expired blocks
	// (jobbill_expired_credits_total): for paid blocks, breakage.
	ExpiredCredits = "jobbill_expired_credits"
	// LedgerLatency is the time of each ledger call (jobbill_ledger_operation_latency_seconds{operation}).
	LedgerLatency = "jobbill_ledger_operation_latency"
	// LedgerAlarms counts ledger steps the database refused for good, each raised as an alarm that
	// an operator must look at (jobbill_ledger_alarms_total{step}).
	LedgerAlarms = "jobbill_ledger_alarms"
	// WebhookAttempts counts webhook delivery attempts by what became of the delivery: delivered,
	// retry, failed (given up after max age) or not_recorded (jobbill_webhook_attempts_total{outcome}).
	WebhookAttempts = "jobbill_webhook_attempts"
	// WebhookLatency is how long each attempt took, send and answer
	// (jobbill_webhook_attempt_latency_seconds).
	WebhookLatency = "jobbill_webhook_attempt_latency"
	// HTTPRequests counts the HTTP API's answers by route pattern and status
	// (jobbill_http_requests_total{route, status}).
	HTTPRequests = "jobbill_http_requests_total"
	// HTTPLatency is how long the HTTP API took to answer, by route pattern
	// (jobbill_http_request_duration_seconds{route}).
	HTTPLatency = "jobbill_http_request_duration_seconds"
)

// HTTPRequest records one answer of the HTTP API: the route pattern that served it (never the
// path: a client must not be able to mint labels), its status and how long it took.
func (m *Metrics) HTTPRequest(route string, status int, took time.Duration) {
	if m == nil {
		return
	}
	m.httpRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.httpLatency.WithLabelValues(route).Observe(took.Seconds())
}

// LedgerCall records one guarded ledger call of the named operation (submit, charge, refund,
// reclaim, deliver, settle): its latency, and what it did to the money.
func (m *Metrics) LedgerCall(operation string, t ledgerdb.Transition, err error, took time.Duration) {
	if m == nil {
		return
	}
	m.scope.Tagged(map[string]string{"operation": operation}).Timer(LedgerLatency).Record(took)
	switch {
	case errors.Is(err, ledgerdb.ErrInsufficientCredits) || (operation == "charge" && errors.Is(err, ledgerdb.ErrGone)):
		m.scope.Counter(RejectedCharges).Inc(1)
	case err != nil:
	case t.Outcome == ledgerdb.Applied:
		switch operation {
		case "charge":
			m.scope.Counter(Charges).Inc(1)
		case "refund":
			m.scope.Counter(Refunds).Inc(1)
			m.scope.Counter(DeadLetters).Inc(1)
		case "reclaim":
			m.scope.Counter(Reclaims).Inc(1)
		case "settle":
			// A settle that recovers a job reclaimed its refund; one that delivers moves money only
			// through its release.
			if t.Job.State == ledgerdb.StateRecovered {
				m.scope.Counter(Reclaims).Inc(1)
			}
			if t.Job.IsSettled {
				m.scope.Counter(Settlements).Inc(1)
				m.scope.Counter(ReleasedCredits).Inc(t.Job.Released())
			}
		}
	default:
		m.scope.Tagged(map[string]string{"operation": operation, "outcome": string(t.Outcome)}).Counter(GuardNoops).Inc(1)
	}
}

// CreditsExpired records what one batch of the expiry pass removed: blocks expired and credits.
func (m *Metrics) CreditsExpired(blocks int, credits int64) {
	if m == nil {
		return
	}
	m.scope.Counter(ExpiredBlocks).Inc(int64(blocks))
	m.scope.Counter(ExpiredCredits).Inc(credits)
}

// LedgerAlarm records an alarm raised for a ledger step the database refused for good.
func (m *Metrics) LedgerAlarm(step string) {
	if m == nil {
		return
	}
	m.scope.Tagged(map[string]string{"step": step}).Counter(LedgerAlarms).Inc(1)
}

// ResultAfterClose records a result that reached the late-result fallback, and what it did.
func (m *Metrics) ResultAfterClose(outcome ledgerdb.Outcome) {
	if m == nil {
		return
	}
	m.scope.Tagged(map[string]string{"outcome": string(outcome)}).Counter(ResultsAfterClose).Inc(1)
}

// WebhookAttempt records one webhook delivery attempt: what became of the delivery (delivered,
// retry, failed, or not_recorded when its record could not be written) and how long it took.
func (m *Metrics) WebhookAttempt(outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.scope.Tagged(map[string]string{"outcome": outcome}).Counter(WebhookAttempts).Inc(1)
	m.scope.Timer(WebhookLatency).Record(took)
}
