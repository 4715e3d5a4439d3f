package api_test

// What every answer carries whatever its route: a request ID, Retry-After on 503 and 429, the
// HTTP metrics, and the per-key rate limit.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/metrics"
)

// reply is an answer with its headers.
type reply struct {
	code   int
	header http.Header
	body   string
}

// send makes a request with the given headers (the key, if any, as a bearer) and reads the answer.
func send(t *testing.T, base, method, path, key string, header map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{code: resp.StatusCode, header: resp.Header, body: string(data)}
}

var saneRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// TestRequestIDOnEveryAnswerAndLogLine checks that every answer — success, 400, 401, 404, 405,
// 500, 503 — carries an X-Request-Id, the client's own when it is sane (at most 64 of
// [A-Za-z0-9._-]) and a fresh one otherwise, and that the request's log line and every warning
// logged about it (a handler's, a readiness check's, a key check's) carry the same ID: support can
// take the ID a customer quotes about a charge and find what the server did with that request
// (the idempotent-doors rule: a request delivered twice is told apart from two requests).
func TestRequestIDOnEveryAnswerAndLogLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	// The ledger the server reads is closed, so a key of the ledger cannot be checked (503) and
	// a bootstrap admin key, checked without it, reaches a handler whose read fails (500).
	customer, key := e.key(t, apikeys.ScopeCustomer, acct), newKey(t, "admin")
	core, logs := observer.New(zapcore.InfoLevel)
	closed, err := ledgerdb.Open(context.Background(), ledgertest.DatabaseURL())
	require.NoError(t, err)
	closed.Close()
	base := e.serve(t, func(o *api.Options) {
		o.Config.Keys = []config.APIKey{{Key: key, Admin: true}}
		o.Logger = zap.New(core)
		o.Ledger = closed // every ledger read fails: a 500 with a warning
		o.Ready = append(o.Ready, api.Check{Name: "down", Probe: func(context.Context) error { return fmt.Errorf("unreachable") }})
	})

	seen := map[string]bool{}
	for _, tc := range []struct {
		method, path, key string
		want              int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 503},
		{"GET", "/v1/jobs/" + ledgertest.ID(t, "never"), "", 401},
		{"GET", "/v1/jobs/bad%20id", key, 400},
		{"GET", "/v1/accounts/" + acct, key, 500},
		{"GET", "/v2/nothing", key, 404},
		{"PUT", "/v1/jobs/x", key, 405},
		{"GET", "/v1/accounts/" + acct, customer, 503},
	} {
		r := send(t, base, tc.method, tc.path, tc.key, nil)
		require.Equal(t, tc.want, r.code, "%s %s: %s", tc.method, tc.path, r.body)
		id := r.header.Get("X-Request-Id")
		require.Regexp(t, saneRequestID, id, "%s %s", tc.method, tc.path)
		require.False(t, seen[id], "each request gets its own ID")
		seen[id] = true
	}

	for _, sane := range []string{"req-42", "a.b_c-D.9", strings.Repeat("x", 64)} {
		require.Equal(t, sane, send(t, base, "GET", "/healthz", "", map[string]string{"X-Request-Id": sane}).header.Get("X-Request-Id"))
	}
	for _, insane := range []string{strings.Repeat("x", 65), "has space", "a/b", "é", "a\tb", "${jndi:x}"} {
		got := send(t, base, "GET", "/healthz", "", map[string]string{"X-Request-Id": insane}).header.Get("X-Request-Id")
		require.NotEqual(t, insane, got, "an unsafe ID is replaced")
		require.Regexp(t, saneRequestID, got)
	}

	traced := send(t, base, "GET", "/v1/accounts/"+acct, key, map[string]string{"X-Request-Id": "trace-500"})
	require.Equal(t, 500, traced.code)
	require.Equal(t, "trace-500", traced.header.Get("X-Request-Id"))
	ready := send(t, base, "GET", "/readyz", "", map[string]string{"X-Request-Id": "trace-ready"})
	require.Equal(t, 503, ready.code)
	unchecked := send(t, base, "GET", "/v1/accounts/"+acct, customer, map[string]string{"X-Request-Id": "trace-key"})
	require.Equal(t, 503, unchecked.code)
	for _, want := range []struct{ id, message string }{
		{"trace-500", "api request"}, {"trace-500", "api request failed"},
		{"trace-ready", "api request"}, {"trace-ready", "readiness check failed"},
		{"trace-key", "api request"}, {"trace-key", "api key check failed"},
	} {
		require.NotEmpty(t, logs.FilterMessage(want.message).FilterField(zap.String("request_id", want.id)).All(),
			"the %q line of request %s carries its ID", want.message, want.id)
	}
	for _, entry := range logs.All() {
		require.Contains(t, entry.ContextMap(), "request_id", "every API log line names its request: %q", entry.Message)
	}
}

// TestRetryAfterOn503 checks that every 503 tells the client when to retry — the readiness check
// and a handler that ran out of time — so that a client's retries of a submission (the
// idempotent-doors rule: safe, never a second charge) are paced by the server instead of hammering
// it.
func TestRetryAfterOn503(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	// A bootstrap admin key is checked without the ledger, so the request reaches the handler,
	// which runs out of time.
	key := newKey(t, "admin")
	down := e.serve(t, func(o *api.Options) {
		o.Ready = append(o.Ready, api.Check{Name: "down", Probe: func(context.Context) error { return fmt.Errorf("unreachable") }})
	})
	hurried := e.serve(t, func(o *api.Options) {
		o.Config.Keys = []config.APIKey{{Key: key, Admin: true}}
		o.Config.RequestTimeout = time.Nanosecond
	})
	for _, r := range []reply{send(t, down, "GET", "/readyz", "", nil), send(t, hurried, "GET", "/v1/accounts/"+acct, key, nil)} {
		require.Equal(t, 503, r.code, r.body)
		seconds, err := strconv.Atoi(r.header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After is whole seconds: %q", r.header.Get("Retry-After"))
		require.GreaterOrEqual(t, seconds, 1)
	}
	require.Empty(t, send(t, down, "GET", "/healthz", "", nil).header.Get("Retry-After"), "only a 503 or 429 says when to retry")
}

// TestHTTPMetricsByRoutePattern checks the API's HTTP metrics on the process's Prometheus page:
// answers counted by route pattern and status, and a latency histogram by route. The label is the
// pattern, never the path, so a client cannot grow the page with IDs of its own (and no job or
// account ID reaches the metrics).
func TestHTTPMetricsByRoutePattern(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.key(t, apikeys.ScopeCustomer, ledgertest.Account(t, e.Store, 0))
	m := metrics.New()
	t.Cleanup(func() { _ = m.Close() })
	base := e.serve(t, func(o *api.Options) { o.Metrics = m })

	never1, never2 := ledgertest.ID(t, "never-a"), ledgertest.ID(t, "never-b")
	require.Equal(t, 404, send(t, base, "GET", "/v1/jobs/"+never1, key, nil).code)
	require.Equal(t, 404, send(t, base, "GET", "/v1/jobs/"+never2, key, nil).code)
	require.Equal(t, 200, send(t, base, "GET", "/healthz", "", nil).code)
	require.Equal(t, 401, send(t, base, "POST", "/v1/jobs", "", nil).code)
	require.Equal(t, 404, send(t, base, "GET", "/v2/"+never1, key, nil).code)
	require.Equal(t, 405, send(t, base, "PUT", "/v1/jobs/"+never1, key, nil).code)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	page := rec.Body.String()
	for _, series := range []string{
		`jobbill_http_requests_total{route="GET /v1/jobs/{id}",status="404"} 2`,
		`jobbill_http_requests_total{route="GET /healthz",status="200"} 1`,
		`jobbill_http_requests_total{route="POST /v1/jobs",status="401"} 1`,
		`jobbill_http_requests_total{route="/",status="404"} 1`,
		`jobbill_http_requests_total{route="/v1/jobs/{id}",status="405"} 1`,
		`jobbill_http_request_duration_seconds_count{route="GET /v1/jobs/{id}"} 2`,
		`jobbill_http_request_duration_seconds_bucket{route="GET /healthz",le="+Inf"} 1`,
	} {
		require.Contains(t, page, series+"\n")
	}
	require.NotContains(t, page, never1, "a path never becomes a label")
	require.NotContains(t, page, never2)
}

// TestMetricsNotOnThePublicPort checks that the API's public port does not serve /metrics — the
// page names routes, volumes and ledger timings that are the operator's business — and answers it
// like any unknown path.
func TestMetricsNotOnThePublicPort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := e.serve(t, nil)
	a := call(t, base, "GET", "/metrics", "", nil)
	require.Equal(t, 404, a.code, a.raw)
	require.Equal(t, "no_route", a.str("code"))
}

// slowRefill is a rate limit whose buckets get a token back only every 100 s: no token comes back
// while a test spends a burst and sends its requests after it, however slowly a loaded machine
// answers them, so the number of requests refused does not depend on the machine's speed.
var slowRefill = config.RateLimit{PerSecond: 0.01}

// TestGuessedKeysAreLimitedByAddress checks that inventing keys is no way around the rate limit:
// the limit's buckets are keyed by the credential presented, so each invented key would have a
// full bucket of its own; refused authentications are counted per remote address as well, and
// once an address has spent its burst of them, every request from it that needs a key is
// answered 429 with Retry-After before any key is looked up — nothing is read or written.
func TestGuessedKeysAreLimitedByAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	limit := slowRefill
	limit.Burst = 5
	base := e.serve(t, func(o *api.Options) { o.Config.RateLimit = limit })
	codes := map[int]int{}
	for i := range 50 {
		codes[send(t, base, "GET", "/v1/prices", fmt.Sprintf("jb_admin_guess%040d", i), nil).code]++
	}
	require.Equal(t, map[int]int{401: 5, 429: 45}, codes, "50 invented keys from one address")
	r := send(t, base, "GET", "/v1/prices", "jb_admin_guess-one-more", nil)
	require.Equal(t, 429, r.code)
	require.NotEmpty(t, r.header.Get("Retry-After"))
	require.Equal(t, 200, send(t, base, "GET", "/healthz", "", nil).code, "health checks are never limited")
}

// TestRateLimitPerKey checks the per-key rate limit: a key that spends its burst is answered 429
// rate_limited in the API's error shape with a Retry-After and nothing done — a submission refused
// this way writes no job — while another key goes on; its tokens come back with time. Requests
// without a key, or with an unknown one, are limited too (by address, and by the key presented),
// and the health checks never are.
func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	keyA, keyB := e.key(t, apikeys.ScopeCustomer, acct), e.key(t, apikeys.ScopeCustomer, acct)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	limit := slowRefill
	limit.Burst = 3
	base := e.serve(t, func(o *api.Options) { o.Config.RateLimit = limit })

	for range 3 {
		require.Equal(t, 200, send(t, base, "GET", "/v1/prices", keyA, nil).code)
	}
	refused := ledgertest.ID(t, "job-refused")
	a := call(t, base, "POST", "/v1/jobs", keyA, job(refused, acct, e.fixed(t, 10), "sim:ok"))
	require.Equal(t, 429, a.code, a.raw)
	require.Equal(t, "rate_limited", a.str("code"))
	require.NotEmpty(t, a.str("message"))
	r := send(t, base, "GET", "/v1/prices", keyA, nil)
	require.Equal(t, 429, r.code)
	retry, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After is whole seconds")
	require.True(t, retry >= 1 && retry <= 100, "a token every 100 s: retry within 100 s, not %d", retry)
	require.Regexp(t, saneRequestID, r.header.Get("X-Request-Id"))
	require.Equal(t, 200, send(t, base, "GET", "/v1/prices", keyB, nil).code, "another key has its own bucket")
	require.Equal(t, 404, call(t, base, "GET", "/v1/jobs/"+refused+"?account_id="+acct, admin, nil).code, "the refused submission wrote nothing")

	codes := []int{}
	for range 4 {
		codes = append(codes, send(t, base, "GET", "/v1/prices", "", nil).code)
	}
	require.Equal(t, []int{401, 401, 401, 429}, codes, "no key: limited by address")
	// Each invented key has a bucket of its own, but refused keys are counted per address too:
	// the address's budget of failed authentications is spent, so a guess is refused at once.
	codes = codes[:0]
	for i := range 4 {
		codes = append(codes, send(t, base, "GET", "/v1/prices", fmt.Sprintf("unknown-key-%d", i), nil).code)
	}
	require.Equal(t, []int{429, 429, 429, 429}, codes, "fresh invented keys from an address out of failed authentications")
	for range 10 {
		require.Equal(t, 200, send(t, base, "GET", "/healthz", "", nil).code, "health checks are never limited")
		require.Equal(t, 200, send(t, base, "GET", "/readyz", "", nil).code)
	}

	// Tokens come back with time, to a key and to an address's failed authentications: with a
	// token every 5 s — far longer than the three requests that spend both buckets and find them
	// spent take — the key is let in again once 5 s have passed (a loaded machine that takes
	// longer only gives back more, up to the burst).
	refill := e.serve(t, func(o *api.Options) { o.Config.RateLimit = config.RateLimit{PerSecond: 0.2, Burst: 1} })
	require.Equal(t, 200, send(t, refill, "GET", "/v1/prices", keyA, nil).code)
	require.Equal(t, 401, send(t, refill, "GET", "/v1/prices", "unknown-key-refill", nil).code)
	require.Equal(t, 429, send(t, refill, "GET", "/v1/prices", keyA, nil).code, "the key's bucket and the address's are spent")
	time.Sleep(5100 * time.Millisecond)
	require.Equal(t, 200, send(t, refill, "GET", "/v1/prices", keyA, nil).code, "a token came back (to the key, and to the address's failed authentications)")
}

// TestOversizeHeaderBlockAnswersInTheAPIShape sends, over a raw connection to the API's own
// listener (api.Server.Serve, as `jobbill api` runs it), a request whose header block is over the
// limit: the answer is 431 in the API's error shape — code headers_too_large, a sentence saying the
// limit and that nothing was done, no-store — with an X-Request-Id that the request's log line
// carries too, and the metrics count it; before, the HTTP server answered it itself in plain text,
// without either. The idempotent-doors rule: a refused request is told apart by its ID, and says
// that it did nothing. A header block within the limit on the same listener is served as usual.
func TestOversizeHeaderBlockAnswersInTheAPIShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	core, logs := observer.New(zapcore.InfoLevel)
	m := metrics.New()
	t.Cleanup(func() { _ = m.Close() })
	s := api.New(api.Options{Config: config.Default().API, Jobs: e.Jobs, Ledger: e.Store, Logger: zap.New(core), Metrics: m})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	// raw sends a GET /healthz whose X-Padding header holds padding bytes, as bytes on the wire,
	// and reads the answer.
	raw := func(padding int) (*http.Response, []byte) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		_, err = fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: api\r\nX-Request-Id: mine\r\nX-Padding: %s\r\n\r\n", strings.Repeat("a", padding))
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, body
	}

	resp, body := raw(api.MaxHeaderBytes + 8<<10)
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode, "%s", body)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), "%s", body)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	id := resp.Header.Get("X-Request-Id")
	require.Regexp(t, saneRequestID, id)
	var got apitype.Error
	require.NoError(t, json.Unmarshal(body, &got), "%s", body)
	require.Equal(t, "headers_too_large", got.Code)
	require.Contains(t, got.Message, "16 KiB")
	require.Contains(t, got.Message, "Nothing was done")
	require.NotEmpty(t, logs.FilterField(zap.String("request_id", id)).FilterField(zap.Int("status", 431)).All(),
		"the refused request's log line carries its ID")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Contains(t, rec.Body.String(), `jobbill_http_requests_total{route="",status="431"} 1`+"\n")

	resp, body = raw(api.MaxHeaderBytes / 2)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Equal(t, "mine", resp.Header.Get("X-Request-Id"))
}
