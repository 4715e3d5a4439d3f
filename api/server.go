package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/webhooks"
)

// Options configures a [Server].
type Options struct {
	// Config is the API's configuration: its limits, timeouts and bootstrap admin keys. Start
	// from config.Default().API, the one home of the API's defaults.
	Config config.API
	// Jobs submits and follows jobs.
	Jobs *jobs.Service
	// Ledger answers accounts, ledger pages, grants and prices, and keeps the API keys (package
	// apikeys) that every request but the health checks is authenticated against. Without it,
	// only the bootstrap keys of Config authenticate.
	Ledger *ledgerdb.Store
	// WebhookURLs says which receiver URLs a webhook endpoint may have (webhooks.allow_private_urls
	// loosens it for development); the delivery worker checks them by the same policy.
	WebhookURLs webhooks.URLPolicy
	// Ready are the dependencies /readyz checks (Postgres and Temporal in `jobbill api`).
	Ready []Check
	// Logger logs one line per request (never a key or a body); nothing when nil.
	Logger *zap.Logger
	// Metrics records each answer by route pattern and status, and its latency (a
	// *metrics.Metrics); nothing when nil. The API never serves the Prometheus page itself: its
	// process does, on the operator's listener (api.metrics_listen).
	Metrics Recorder
	// Console, when set, is served under /console/ on the same listener (package console): the
	// web pages for customers and operators, which authenticate with sessions of their own and
	// limit their own rate: the API's rate limit does not count them.
	Console http.Handler
}

// The console's patterns on the API's mux: its pages, and the bare path that leads to them.
const (
	consolePattern  = "/console/"
	consoleRedirect = "/console"
)

// Check is one readiness probe.
type Check struct {
	// Name names the dependency in /readyz's answer ("postgres", "temporal").
	Name string
	// Probe answers nil when the dependency is reachable.
	Probe func(ctx context.Context) error
}

// Server is the HTTP API. Its Handler is safe for concurrent use.
type Server struct {
	opts Options
	// keys creates, lists and revokes API keys (the /v1/keys routes); auth authenticates
	// requests against them and the configuration's bootstrap keys.
	keys *apikeys.Store
	auth *apikeys.Authenticator
	// hooks keeps the accounts' webhook endpoints, their delivery logs and low-balance thresholds.
	hooks   *webhooks.Store
	limiter *limiter
	// failedAuth counts, per remote address, the requests whose key was refused: the limiter
	// above keys its buckets by the credential presented, so each invented key would get a full
	// bucket of its own. An address out of tokens here is answered 429 before any key is looked up.
	failedAuth *limiter
	routes     []route
	handler    http.Handler
	// undeclared, set by tests, hears of any status a route answers that its declaration (and so
	// the OpenAPI document) does not list.
	undeclared func(pattern string, status int)
}

// handlerFunc does a route's work and returns the status and body to answer, or an error.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error)

// route is one method and path, who may call it, and every status it can answer.
type route struct {
	method, path string
	// access names the scopes of the keys that may call the route (openapi.yaml's x-scopes);
	// the handler then checks which account a key may act for.
	access   access
	statuses []int
	handle   handlerFunc
}

// commonStatuses can be answered by every route that takes a key.
var commonStatuses = []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden,
	http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable}

// New builds the API's handler from opts.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Server{opts: opts, limiter: newLimiter(opts.Config.RateLimit, maxRateBuckets),
		failedAuth: newLimiter(opts.Config.RateLimit, maxRateBuckets)}
	if opts.Ledger != nil {
		s.keys = apikeys.NewStore(opts.Ledger.Pool())
		s.hooks = webhooks.NewStore(opts.Ledger.Pool())
	}
	bootstrap := make([]string, len(opts.Config.Keys))
	for i, k := range opts.Config.Keys {
		bootstrap[i] = k.Key
	}
	s.auth = apikeys.NewAuthenticator(s.keys, bootstrap)
	s.routes = []route{
		{"POST", "/v1/jobs", accountWriters, []int{200, 201, 202, 402, 409, 410, 413, 422}, s.submitJob},
		{"GET", "/v1/jobs", accountReaders, []int{200, 404}, s.listJobs},
		{"GET", "/v1/jobs/{id}", accountReaders, []int{200, 404, 410}, s.getJob},
		{"DELETE", "/v1/jobs/{id}", accountWriters, []int{200, 404, 409}, s.deleteJob},
		{"POST", "/v1/jobs/{id}/result", resultReporters, []int{200, 202, 404, 409, 410, 413}, s.reportResult},
		{"POST", "/v1/jobs/{id}/redrive", adminsOnly, []int{202, 404, 409, 410, 413}, s.redriveJob},
		{"GET", "/v1/accounts/{id}", accountReaders, []int{200, 404}, s.getAccount},
		{"GET", "/v1/accounts/{id}/ledger", accountReaders, []int{200, 404}, s.getLedger},
		{"POST", "/v1/accounts/{id}/grants", adminsOnly, []int{200, 201, 404, 409, 413, 422}, s.grant},
		{"POST", "/v1/accounts/{id}/grants/{key}/settle", adminsOnly, []int{200, 404, 409, 413, 422}, s.settleGrant},
		{"GET", "/v1/accounts/{id}/topup-rule", accountReaders, []int{200, 404}, s.getTopUpRule},
		{"PUT", "/v1/accounts/{id}/topup-rule", adminsOnly, []int{200, 404, 413}, s.setTopUpRule},
		{"DELETE", "/v1/accounts/{id}/topup-rule", adminsOnly, []int{200, 404}, s.removeTopUpRule},
		{"GET", "/v1/accounts/{id}/blocks", accountReaders, []int{200, 404}, s.getBlocks},
		{"GET", "/v1/accounts/{id}/statement", accountReaders, []int{200, 404}, s.getStatement},
		{"GET", "/v1/revenue", adminsOnly, []int{200, 404}, s.getRevenue},
		{"PUT", "/v1/accounts/{id}/low-balance-threshold", accountWriters, []int{200, 404, 413}, s.setThreshold},
		{"POST", "/v1/accounts/{id}/webhooks", accountWriters, []int{201, 404, 413, 422}, s.createEndpoint},
		{"GET", "/v1/accounts/{id}/webhooks", accountReaders, []int{200}, s.listEndpoints},
		{"GET", "/v1/accounts/{id}/webhooks/{endpoint}", accountReaders, []int{200, 404}, s.getEndpoint},
		{"DELETE", "/v1/accounts/{id}/webhooks/{endpoint}", accountWriters, []int{200, 404}, s.deleteEndpoint},
		{"POST", "/v1/accounts/{id}/webhooks/{endpoint}/rotate", accountWriters, []int{200, 404, 409}, s.rotateSecret},
		{"GET", "/v1/accounts/{id}/webhooks/{endpoint}/attempts", accountReaders, []int{200, 404}, s.listAttempts},
		{"POST", "/v1/accounts/{id}/webhooks/{endpoint}/replay", accountWriters, []int{202, 404, 409, 413}, s.replay},
		{"GET", "/v1/prices", accountReaders, []int{200}, s.listPrices},
		{"GET", "/v1/prices/{kind}", accountReaders, []int{200, 404}, s.priceHistory},
		{"PUT", "/v1/prices/{kind}", adminsOnly, []int{200, 201, 413}, s.setPrice},
		{"POST", "/v1/keys", adminsOnly, []int{201, 413, 422}, s.createKey},
		{"GET", "/v1/keys", adminsOnly, []int{200}, s.listKeys},
		{"DELETE", "/v1/keys/{id}", adminsOnly, []int{200, 404}, s.revokeKey},
		{"GET", "/healthz", noKey, []int{200}, s.healthz},
		{"GET", "/readyz", noKey, []int{200, 503}, s.readyz},
	}
	mux := http.NewServeMux()
	methods := map[string][]string{}
	for _, rt := range s.routes {
		if !rt.access.public && len(rt.access.scopes) == 0 {
			panic("api: route " + rt.method + " " + rt.path + " names no scope and is not public")
		}
		if !rt.access.public {
			rt.statuses = append(rt.statuses, commonStatuses...)
		}
		mux.Handle(rt.method+" "+rt.path, s.serve(rt))
		methods[rt.path] = append(methods[rt.path], rt.method)
	}
	// A pattern without a method is less specific than one with, so these catch only the methods
	// a path does not serve, and answer in the API's error shape rather than the mux's text.
	for path, ms := range methods {
		allow := strings.Join(ms, ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Allow", allow)
			writeJSON(w, http.StatusMethodNotAllowed, apitype.Error{Code: "method_not_allowed", Message: "Use " + allow + " on this path."})
		})
	}
	if opts.Console != nil {
		mux.Handle(consolePattern, opts.Console)
		mux.Handle(consoleRedirect, http.RedirectHandler("/console/", http.StatusSeeOther))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, apitype.Error{Code: "no_route", Message: "No such path; the API's paths start with /v1/ (see api/openapi.yaml)."})
	})
	s.handler = s.edges(mux)
	return s
}

// Handler is the API as an http.Handler, for a server of the caller's or httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers requests on ln until ctx is done, then stops taking new ones and gives
// in-flight requests (a submission waiting for its charge decision) ShutdownTimeout to finish. A
// header block over MaxHeaderBytes is answered in the API's error shape too (headerLimitListener).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.opts.Config.ReadHeaderTimeout,
		ReadTimeout:       s.opts.Config.ReadTimeout,
		WriteTimeout:      s.opts.Config.WriteTimeout,
		IdleTimeout:       s.opts.Config.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          zap.NewStdLog(s.opts.Logger),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(headerLimitListener{Listener: ln, s: s}) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Config.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("stopping the API: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// serve wraps a route: authentication and scope, a bounded context, the JSON answer, a log line
// and recovery from a panic.
func (s *Server) serve(rt route) http.Handler {
	pattern := rt.method + " " + rt.path
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		log := s.logger(r)
		status, keyID := 0, ""
		defer func() {
			if v := recover(); v != nil {
				log.Error("api handler panicked", zap.String("route", pattern), zap.Any("panic", v))
				status = http.StatusInternalServerError
				writeJSON(w, status, apitype.Error{Code: "internal", Message: msgInternal})
			}
			if s.undeclared != nil && !containsInt(rt.statuses, status) {
				s.undeclared(pattern, status)
			}
			log.Info("api request", zap.String("route", pattern), zap.Int("status", status),
				zap.String("key", keyID), zap.Duration("took", time.Since(start)))
		}()

		// A request that changes something keeps going when its caller hangs up: half a
		// submission helps nobody, and each step is idempotent anyway. Every handler is bounded.
		base := r.Context()
		if r.Method != http.MethodGet {
			base = context.WithoutCancel(base)
		}
		ctx, cancel := context.WithTimeout(base, s.opts.Config.RequestTimeout)
		defer cancel()

		var p *principal
		if !rt.access.public {
			address := addressBucket(r)
			if ok, wait := s.failedAuth.peek(address, start); !ok {
				// Guessing keys from here: refused before the key store is asked.
				status = http.StatusTooManyRequests
				retry := int(math.Ceil(wait.Seconds()))
				w.Header().Set("Retry-After", fmt.Sprint(retry))
				writeJSON(w, status, apitype.Error{Code: "rate_limited", Message: fmt.Sprintf(
					"Too many requests with keys that are not valid from this address; retry in %d s. Nothing was done.", retry)})
				return
			}
			key, err := s.auth.Authenticate(ctx, bearer(r))
			switch {
			case errors.Is(err, apikeys.ErrUnauthenticated):
				// No key, an unknown one, an expired one and a revoked one get the same answer:
				// a caller learns nothing of which keys exist or existed.
				s.failedAuth.take(address, time.Now())
				status = http.StatusUnauthorized
				w.Header().Set("WWW-Authenticate", `Bearer realm="jobbill"`)
				writeJSON(w, status, apitype.Error{Code: "unauthorized", Message: msgUnauthorized})
				return
			case err != nil:
				// The key could not be checked — never "your key is bad" for that.
				log.Warn("api key check failed", zap.String("route", pattern), zap.Error(err))
				status = http.StatusServiceUnavailable
				writeJSON(w, status, apitype.Error{Code: "unavailable", Message: msgUnavailable})
				return
			}
			p = newPrincipal(key)
			keyID = p.keyID
			if !rt.access.allows(p.scope) {
				status = http.StatusForbidden
				writeJSON(w, status, apitype.Error{Code: "forbidden", Message: fmt.Sprintf(
					"A %s key may not call %s; it takes a key of scope %s. Nothing was done.", p.scope, pattern, rt.access.names())})
				return
			}
		}
		var body any
		var err error
		status, body, err = rt.handle(w, r.WithContext(ctx), p)
		if err != nil {
			ae := fromDomain(err)
			if ae.status >= 500 {
				log.Warn("api request failed", zap.String("route", pattern), zap.Error(err))
			}
			status, body = ae.status, ae.body
		}
		if file, ok := body.(fileAnswer); ok {
			file.write(w, status)
			return
		}
		writeJSON(w, status, shownTo(p, body))
	})
}

// fileAnswer is an answer that is a file to download rather than JSON (a statement's CSV).
type fileAnswer struct {
	contentType, filename string
	body                  []byte
}

// write answers the file, never cached, as an attachment of its name.
func (f fileAnswer) write(w http.ResponseWriter, status int) {
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", f.filename))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(f.body)
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// writeJSON answers a status and a JSON body.
func writeJSON(w http.ResponseWriter, status int, body any) {
	jsonHeaders(w.Header())
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// jsonHeaders are the headers of every JSON answer. Answers about money must never be cached.
func jsonHeaders(h http.Header) {
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

// healthz says the process is up; it checks nothing else, so an orchestrator does not restart a
// healthy process because Postgres blinked.
func (s *Server) healthz(http.ResponseWriter, *http.Request, *principal) (int, any, error) {
	return http.StatusOK, map[string]string{"status": "ok"}, nil
}

// readyz says whether the API can serve: every dependency must answer within 2 seconds.
func (s *Server) readyz(_ http.ResponseWriter, r *http.Request, _ *principal) (int, any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	status := http.StatusOK
	for _, c := range s.opts.Ready {
		checks[c.Name] = "ok"
		if err := c.Probe(ctx); err != nil {
			// The reason goes to the log only: it may hold a host name or a user.
			s.logger(r).Warn("readiness check failed", zap.String("check", c.Name), zap.Error(err))
			checks[c.Name], status = "unreachable", http.StatusServiceUnavailable
		}
	}
	state := "ready"
	if status != http.StatusOK {
		state = "not_ready"
	}
	return status, map[string]any{"status": state, "checks": checks}, nil
}
