package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/app"
	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/metrics"
	"github.com/jobbill/jobbill/worker"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// TestMetricsMoveDuringARun scrapes a worker's /metrics while it bills real jobs (the real dev
// server and Postgres): a delivered job, a dead-lettered one, a late result after the workflow
// closed, a rejected charge and a metered job settled at its usage each move their counters, the
// guards' no-ops are counted, and the SDK's own metrics share the page. The counters must agree
// with the ledger (the reversing-pairs, net-effect and sum-of-rows rules: one charge per job, the
// release is the unused hold, balance = sum of rows), and the expiry pass counts the credits it
// removed from an expired block.
func TestMetricsMoveDuringARun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	store := ledgertest.Store(t)

	cfg := workertest.Config("metrics")
	// Two attempts 200 ms apart, a window of a second, and QuickPolicy's timeouts, far beyond the
	// work: the delivered jobs are delivered and the failing one fails, however loaded the machine.
	cfg.Policy = workertest.QuickPolicy()
	cfg.Policy.InitialInterval, cfg.Policy.BackoffCoefficient, cfg.Policy.MaximumInterval = 200*time.Millisecond, 1, 200*time.Millisecond
	cfg.Policy.MaximumAttempts = 2
	cfg.Policy.LateResultWindow = time.Second
	cfg.Runner.Simulated.Duration = 100 * time.Millisecond
	logger, err := connect.NewLogger(config.Log{Level: "warn", Format: "console", Output: "stderr"})
	require.NoError(t, err)

	m := metrics.New()
	defer func() { _ = m.Close() }()
	addr, stop, err := app.ServeMetrics(ctx, "127.0.0.1:0", m, logger)
	require.NoError(t, err)
	defer stop()
	tc, err := connect.Dial(ctx, cfg, logger, m)
	require.NoError(t, err, "the tests' Temporal at %s", cfg.Temporal.Address)
	defer tc.Close()
	st := connect.NewJobs(cfg, tc, store, m)
	w := worker.New(cfg, tc, store, st, m)
	require.NoError(t, w.Start())
	defer w.Stop()

	before := scrape(t, addr)
	account := ledgertest.Account(t, store, 100)
	job := func(name, input string, cost int64) ledgerdb.JobKey {
		j := jobs.Job{ID: ledgertest.ID(t, name), AccountID: account, Kind: ledgertest.Fixed(t, store, cost), InputRef: input}
		_, err := workertest.Submit(ctx, t, st, j)
		if cost <= 100 {
			require.NoError(t, err)
		} else {
			require.True(t, errors.Is(err, ledgerdb.ErrInsufficientCredits), "%v", err)
		}
		return j.Key()
	}
	delivered := job("ok", "sim:ok", 30)
	failed := job("fail", "sim:fail", 30)
	job("rejected", "sim:ok", 1000)
	// Metered by the GPU-second at 1 credit, holding 20: it uses 8, and 12 go back.
	meteredJob := jobs.Job{ID: ledgertest.ID(t, "metered"), AccountID: account, Kind: ledgertest.Metered(t, store, 1, 20), InputRef: "sim:ok+used:8"}
	_, err = workertest.Submit(ctx, t, st, meteredJob)
	require.NoError(t, err)
	metered := meteredJob.Key()
	_, err = st.Wait(ctx, delivered, ledgerdb.StateDelivered)
	require.NoError(t, err)
	_, err = st.Wait(ctx, metered, ledgerdb.StateDelivered)
	require.NoError(t, err)
	_, err = st.Wait(ctx, failed, ledgerdb.StateRefunded)
	require.NoError(t, err)

	// The late-result window is a second: once the workflow has closed, the result goes to the fallback.
	require.Eventually(t, func() bool {
		d, err := tc.DescribeWorkflow(ctx, workflows.JobWorkflowID(account, failed.JobID), "")
		return err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetCloseTime() != nil
	}, 30*time.Second, 200*time.Millisecond)
	report, err := st.ReportResult(ctx, failed, activities.WorkResult{Attempt: 2, OutputRef: "late", FinishedAt: time.Now()})
	require.NoError(t, err)
	require.Equal(t, "fallback", report.Path)
	require.Equal(t, ledgerdb.StateRecovered, report.Status.State)
	ledgertest.RequireSound(t, store, account)

	// A promotional block of 25 credits whose expiry has passed, expired by the worker's expiry
	// pass (run here directly; the schedule that runs it in a deployment is tested in worker/).
	lapsing := ledgertest.Account(t, store, 0)
	block := ledgertest.Promotional(t, store, lapsing, "welcome", 25)
	ledgertest.PassBlockExpiry(t, block)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ledgertest.ID(t, "expire"), TaskQueue: cfg.Temporal.TaskQueue},
		workflows.Expire, activities.ExpiryInput{})
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
	ledgertest.RequireBalance(t, store, lapsing, 0)

	// tally hands values to the Prometheus registry once a second.
	var after map[string]float64
	require.Eventually(t, func() bool {
		after = scrape(t, addr)
		return after[`jobbill_results_after_close_total{outcome="applied"}`]-before[`jobbill_results_after_close_total{outcome="applied"}`] >= 1 &&
			after["jobbill_expired_credits_total"]-before["jobbill_expired_credits_total"] >= 25
	}, 10*time.Second, 250*time.Millisecond)
	// The pass expires every due block of the shared test database, other tests' too.
	require.GreaterOrEqual(t, after["jobbill_expired_blocks_total"]-before["jobbill_expired_blocks_total"], 1.0)
	moved := func(series string) float64 { return after[series] - before[series] }
	require.Equal(t, 3.0, moved("jobbill_charges_total"), "one charge per charged job")
	require.Equal(t, 1.0, moved("jobbill_refunds_total"))
	require.Equal(t, 1.0, moved("jobbill_dead_letters_total"))
	require.Equal(t, 1.0, moved("jobbill_reclaims_total"), "a settlement's release is not a reclaim")
	require.Equal(t, 3.0, moved("jobbill_settlements_total"), "two deliveries and one late recovery")
	require.Equal(t, 12.0, moved("jobbill_released_credits_total"), "the metered job's unused hold")
	ledgertest.RequireBalance(t, store, account, 100-30-30-8)
	require.Equal(t, 1.0, moved("jobbill_rejected_charges_total"))
	require.Greater(t, moved(`jobbill_ledger_operation_latency_seconds_count{operation="charge"}`), 0.0)
	require.Greater(t, moved(`jobbill_ledger_operation_latency_seconds_count{operation="settle"}`), 0.0, "the success path settles in one step")
	require.Greater(t, sumPrefix(after, "temporal_"), 0.0, "the SDK's metrics are on the same page")
}

var sample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) ([0-9.eE+-]+|NaN|\+Inf)$`)

// scrape reads a Prometheus text page into series -> value, dropping labels that vary by process
// (only the labels our assertions use are kept, in the order the reporter writes them).
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", addr))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for _, line := range regexp.MustCompile(`\r?\n`).Split(string(body), -1) {
		m := sample.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err, line)
		out[m[1]] += v
	}
	return out
}

func sumPrefix(series map[string]float64, prefix string) float64 {
	var total float64
	for name, v := range series {
		if len(name) >= len(prefix) && name[:len(prefix)] == prefix {
			total += v
		}
	}
	return total
}
