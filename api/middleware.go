package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"time"

	"go.uber.org/zap"

	"github.com/jobbill/jobbill/apitype"
)

// Recorder records the API's answers for its metrics; a *metrics.Metrics is one.
type Recorder interface {
	// HTTPRequest records one answer: the route pattern that served it, its status and how long
	// it took.
	HTTPRequest(route string, status int, took time.Duration)
}

// RequestIDHeader names the request's ID, in the request (the client's own, when sane) and in
// every answer.
const RequestIDHeader = "X-Request-Id"

// saneRequestID is a request ID the API takes from a client: short, and safe in a header, a log
// line and a URL.
var saneRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// retryAfterUnavailable is the Retry-After of a 503, in seconds: the ledger or Temporal did not
// answer in time, and a retry of the same request (safe: it never charges twice) soon may find
// them back.
const retryAfterUnavailable = "2"

// unlimited are the routes the rate limit never refuses: an orchestrator's health checks, and
// the console's paths, which it limits itself — by session, a page view once (package console) —
// where the API's limit would count every person behind one proxy as one caller.
var unlimited = map[string]bool{"GET /healthz": true, "GET /readyz": true, consolePattern: true, consoleRedirect: true}

type requestIDKey struct{}

// edges wraps the routes in what every request gets, whatever its route: a request ID (in the
// answer and in every log line about it), the rate limit, Retry-After on every 503 and 429, and
// the HTTP metrics by route pattern.
func (s *Server) edges(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(RequestIDHeader)
		if !saneRequestID.MatchString(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		// The pattern, never the path, names the route in metrics: a client cannot mint labels.
		_, pattern := mux.Handler(r)
		aw := &answerWriter{ResponseWriter: w}
		if s.opts.Metrics != nil {
			defer func() { s.opts.Metrics.HTTPRequest(pattern, aw.status(), time.Since(start)) }()
		}
		if !unlimited[pattern] {
			if ok, wait := s.limiter.take(callerBucket(r), start); !ok {
				retry := int(math.Ceil(wait.Seconds()))
				aw.Header().Set("Retry-After", fmt.Sprint(retry))
				writeJSON(aw, http.StatusTooManyRequests, apitype.Error{Code: "rate_limited", Message: fmt.Sprintf(
					"Too many requests with this API key (or, without one, from this address); retry in %d s. Nothing was done.", retry)})
				return
			}
		}
		mux.ServeHTTP(aw, r)
	})
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// logger is the API's logger for a request: every line it writes names the request's ID.
func (s *Server) logger(r *http.Request) *zap.Logger {
	if id, ok := r.Context().Value(requestIDKey{}).(string); ok {
		return s.opts.Logger.With(zap.String("request_id", id))
	}
	return s.opts.Logger
}

// answerWriter notes an answer's status, for the metrics, and adds the headers a status calls
// for, whoever answers it: Retry-After on a 503 or 429 that has none, and Connection: close after
// a body too large to read (the rest of it is not worth reading).
type answerWriter struct {
	http.ResponseWriter
	code int
}

func (a *answerWriter) WriteHeader(code int) {
	if a.code == 0 {
		a.code = code
		switch code {
		case http.StatusServiceUnavailable, http.StatusTooManyRequests:
			if a.Header().Get("Retry-After") == "" {
				a.Header().Set("Retry-After", retryAfterUnavailable)
			}
		case http.StatusRequestEntityTooLarge:
			a.Header().Set("Connection", "close")
		}
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWriter) Write(b []byte) (int, error) {
	if a.code == 0 {
		a.WriteHeader(http.StatusOK)
	}
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

func (a *answerWriter) status() int {
	if a.code == 0 {
		return http.StatusOK
	}
	return a.code
}
