package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/app"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// TestAPIServesMetricsOnTheOperatorListener runs `jobbill api` as the binary does and checks where
// its metrics are: the Prometheus page, with the API's HTTP metrics beside the SDK's, on
// api.metrics_listen (an operator's address), and not on the public port, which answers /metrics
// like any unknown path. The process stops cleanly when told to.
func TestAPIServesMetricsOnTheOperatorListener(t *testing.T) {
	workertest.NeedsTemporal(t) // RunAPI dials Temporal and opens the ledger itself
	cfg := workertest.Config("api-metrics")
	cfg.DatabaseURL = ledgertest.DatabaseURL()
	cfg.API.Listen, cfg.API.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.API.Keys = []config.APIKey{{Key: "metrics-test-admin-key-0001", Admin: true}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- app.RunAPI(ctx, cfg, zap.NewNop(), w) }()

	addr := map[string]string{}
	lines := bufio.NewScanner(out)
	listening := regexp.MustCompile(`^jobbill api (listening|metrics) on http://([^/ ]+)`)
	for len(addr) < 2 && lines.Scan() {
		if m := listening.FindStringSubmatch(lines.Text()); m != nil {
			addr[m[1]] = m[2]
		}
	}
	require.Len(t, addr, 2, "RunAPI says where it listens and where its metrics are")
	go func() { _, _ = io.Copy(io.Discard, out) }()

	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("http://" + addr["listening"] + "/metrics")
	require.Equal(t, 404, code)
	require.Contains(t, body, `"no_route"`)
	code, _ = get("http://" + addr["listening"] + "/healthz")
	require.Equal(t, 200, code)

	code, page := get(fmt.Sprintf("http://%s/metrics", addr["metrics"]))
	require.Equal(t, 200, code)
	require.Contains(t, page, `jobbill_http_requests_total{route="GET /healthz",status="200"} 1`)
	require.Contains(t, page, `jobbill_http_requests_total{route="/",status="404"} 1`)
	require.Eventually(t, func() bool {
		_, page := get(fmt.Sprintf("http://%s/metrics", addr["metrics"]))
		return strings.Contains(page, "temporal_")
	}, 10*time.Second, 250*time.Millisecond, "the SDK's metrics share the page")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("RunAPI did not stop")
	}
}
