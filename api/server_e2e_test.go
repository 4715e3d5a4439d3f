package api_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/config"
)

// TestHealthReadinessAndRouting checks /healthz, /readyz (503 naming the unreachable dependency,
// without its error) and the JSON answers for unknown paths (404) and methods (405).
func TestHealthReadinessAndRouting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := e.serve(t, nil)
	require.Equal(t, 200, call(t, base, "GET", "/healthz", "", nil).code)
	a := call(t, base, "GET", "/readyz", "", nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "ok", a.str("checks", "postgres"))
	require.Equal(t, "ok", a.str("checks", "temporal"))
	down := e.serve(t, func(o *api.Options) {
		o.Ready = append(o.Ready, api.Check{Name: "temporal-2", Probe: func(context.Context) error {
			return fmt.Errorf("dial tcp 10.0.0.1:7233: secret-host unreachable")
		}})
	})
	a = call(t, down, "GET", "/readyz", "", nil)
	require.Equal(t, 503, a.code, a.raw)
	require.Equal(t, "unreachable", a.str("checks", "temporal-2"))
	require.NotContains(t, a.raw, "secret-host")
	require.Equal(t, "no_route", call(t, base, "GET", "/v2/jobs", "", nil).str("code"))
	require.Equal(t, 405, call(t, base, "PUT", "/v1/jobs/x", "", nil).code)
}

// TestServeStopsOnCancel checks the clean shutdown: once its context is done, Serve lets the
// in-flight request finish and returns nil.
func TestServeStopsOnCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config.Default().API
	cfg.ShutdownTimeout = 5 * time.Second
	s := api.New(api.Options{Config: cfg, Jobs: e.Jobs, Ledger: e.Store})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context was cancelled")
	}
}
