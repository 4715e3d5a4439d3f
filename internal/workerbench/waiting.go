package workerbench

// Many waiting jobs: a deployment where GPU jobs time out often holds thousands of refunded jobs
// listening for a late result, each an open workflow with a timer, cached in its worker. This mode
// builds that load, measures what it costs to hold (the worker's memory, the databases' size)
// and how fast a result is reclaimed under it, then sends a burst of late results and checks
// each is reclaimed exactly once.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// WaitingConfig turns the run into the many-waiting-jobs measurement when Jobs > 0 (the
// throughput rounds and the latency part are then skipped).
type WaitingConfig struct {
	// Jobs is how many refunded jobs wait for a late result at once (e.g. 10,000).
	Jobs int
	// Burst is how many of them get a late result in the burst (default 1,000), sent evenly over
	// BurstWithin (default 1 minute).
	Burst       int
	BurstWithin time.Duration
	// Probe is how many get a result one every Config.SignalInterval before the burst, for the
	// latency at rest under the load (default 150).
	Probe int
}

func (c WaitingConfig) withDefaults() WaitingConfig {
	if c.Burst <= 0 {
		c.Burst = 1000
	}
	if c.BurstWithin <= 0 {
		c.BurstWithin = time.Minute
	}
	if c.Probe <= 0 {
		c.Probe = 150
	}
	return c
}

// WaitingResult is what the many-waiting-jobs measurement found.
type WaitingResult struct {
	// Jobs were refunded and listening at once.
	Jobs int
	// Submitted is how long it took to submit them and see them all refunded.
	Submitted time.Duration
	// RSS is this process's resident memory (the worker, its workflow cache, the client) with
	// every job waiting; ServerRSS the Temporal server's.
	RSS, ServerRSS int64
	// DatabaseBytesBefore and DatabaseBytes are each database's size before the jobs were
	// submitted and with every job waiting.
	DatabaseBytesBefore, DatabaseBytes map[string]int64
	// Probe is the result-to-reclaim latency of results sent one at a time under the load;
	// Burst that of the burst, sent evenly over BurstSent.
	Probe, Burst Latency
	BurstSent    time.Duration
	// Drained is how long the results for every job left took to be reclaimed, sent by
	// Config.Concurrency senders at once; DrainedJobs how many.
	Drained     time.Duration
	DrainedJobs int
}

// runWaiting is Run's many-waiting-jobs mode.
func (b *bench) runWaiting(ctx context.Context) (WaitingResult, error) {
	wc := b.cfg.Waiting.withDefaults()
	n := wc.Jobs
	if wc.Probe+wc.Burst > n {
		return WaitingResult{}, fmt.Errorf("waiting: %d jobs cannot give %d probe and %d burst results", n, wc.Probe, wc.Burst)
	}
	res := WaitingResult{Jobs: n}
	var err error
	if res.DatabaseBytesBefore, err = b.databaseSizes(ctx); err != nil {
		return res, err
	}
	ids := make([]string, n)
	workflowIDs := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("wb-%s-wait-%05d", b.runID, i)
		workflowIDs[i] = workflows.JobWorkflowID(b.accounts[i%len(b.accounts)], ids[i])
	}

	// 1. Submit every job; each fails its one attempt and is refunded, then listens.
	start := time.Now()
	err = forEach(ctx, n, b.cfg.Concurrency, func(ctx context.Context, i int) error {
		account := b.accounts[i%len(b.accounts)]
		b.expect(ids[i], account, ledgerdb.StateRecovered)
		sub, err := b.latencyJobs.Submit(ctx, jobs.Job{ID: ids[i], AccountID: account, Kind: b.kind, InputRef: "sim:fail"})
		if err != nil {
			return fmt.Errorf("submitting %s: %w", ids[i], err)
		}
		// Submitting is the documented "poll again": under load the charge may be decided after
		// Submit's own wait, and the wait for every job's refund below covers it.
		if sub.Status.State != ledgerdb.StateRunning && sub.Status.State != ledgerdb.StateSubmitting {
			return fmt.Errorf("submitting %s: %s, not running", ids[i], sub.Status.State)
		}
		if (i+1)%1000 == 0 {
			fmt.Fprintf(b.out, "waiting: %d jobs submitted in %s\n", i+1, time.Since(start).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("waiting: %w", err)
	}
	if err := b.awaitStates(ctx, ids, ledgerdb.StateRefunded, n, 10*time.Minute); err != nil {
		return res, err
	}
	// Every job's refund is committed; the workflow task that wrote it goes on to listen at
	// once. Let the last ones finish before measuring at rest.
	time.Sleep(2 * time.Second)
	res.Submitted = time.Since(start)
	fmt.Fprintf(b.out, "waiting: %d jobs refunded and listening for a late result after %s\n", n, res.Submitted.Round(time.Second))

	// 2. What holding them costs.
	res.RSS, _ = processRSS(os.Getpid())
	if b.meter.serverPID != 0 {
		res.ServerRSS, _ = processRSS(b.meter.serverPID)
	}
	if res.DatabaseBytes, err = b.databaseSizes(ctx); err != nil {
		return res, err
	}
	fmt.Fprintf(b.out, "waiting: RSS of this process (worker, workflow cache, client) %s, of the Temporal server %s; databases %s (before the jobs: %s)\n",
		mib(res.RSS), mib(res.ServerRSS), sizes(res.DatabaseBytes), sizes(res.DatabaseBytesBefore))

	// 3. Latency under the load, one result at a time; then the burst.
	probe := ids[:wc.Probe]
	if res.Probe, err = b.reclaimLatency(ctx, probe, workflowIDs[:wc.Probe], b.cfg.SignalInterval); err != nil {
		return res, fmt.Errorf("waiting, probe: %w", err)
	}
	fmt.Fprintf(b.out, "waiting: probe, %d results one every %s: p50 %s  p95 %s  p99 %s  max %s\n",
		wc.Probe, b.cfg.SignalInterval, ms(res.Probe.P50), ms(res.Probe.P95), ms(res.Probe.P99), ms(res.Probe.Max))
	burst, burstWF := ids[wc.Probe:wc.Probe+wc.Burst], workflowIDs[wc.Probe:wc.Probe+wc.Burst]
	interval := wc.BurstWithin / time.Duration(wc.Burst)
	sentAt := time.Now()
	if res.Burst, err = b.reclaimLatency(ctx, burst, burstWF, interval); err != nil {
		return res, fmt.Errorf("waiting, burst: %w", err)
	}
	res.BurstSent = time.Since(sentAt)
	fmt.Fprintf(b.out, "waiting: burst, %d results one every %s: p50 %s  p95 %s  p99 %s  max %s\n",
		wc.Burst, interval, ms(res.Burst.P50), ms(res.Burst.P95), ms(res.Burst.P99), ms(res.Burst.Max))

	// 4. The rest get their result too, as fast as the senders go, so that no job of the run is
	// left open on a task queue no worker will poll again.
	rest, restWF := ids[wc.Probe+wc.Burst:], workflowIDs[wc.Probe+wc.Burst:]
	drainStart := time.Now()
	err = forEach(ctx, len(rest), b.cfg.Concurrency, func(ctx context.Context, i int) error {
		sig := workflows.ResultSignal{Attempt: 1, OutputRef: "sim://" + rest[i] + "/late", FinishedAt: time.Now()}
		return b.signalAgain(ctx, restWF[i], sig)
	})
	if err != nil {
		return res, fmt.Errorf("waiting, drain: %w", err)
	}
	if err := b.awaitStates(ctx, ids, ledgerdb.StateRecovered, n, 20*time.Minute); err != nil {
		return res, err
	}
	res.Drained, res.DrainedJobs = time.Since(drainStart), len(rest)
	fmt.Fprintf(b.out, "waiting: the other %d results sent by %d senders and reclaimed in %s (%.1f reclaims/s)\n",
		len(rest), b.cfg.Concurrency, res.Drained.Round(time.Millisecond), float64(len(rest))/res.Drained.Seconds())
	return res, nil
}

// signalAgain sends a result signal, again after a failed call (a server slow to answer under the
// drain's load): a result delivered twice is reclaimed once (the idempotent-doors rule), which the
// money check after the run shows.
func (b *bench) signalAgain(ctx context.Context, workflowID string, sig workflows.ResultSignal) error {
	var err error
	for try := range 5 {
		if try > 0 {
			time.Sleep(time.Duration(try) * time.Second)
		}
		if err = b.tc.SignalWorkflow(ctx, workflowID, "", workflows.SignalResult, sig); err == nil {
			return nil
		}
	}
	return fmt.Errorf("signalling %s: %w", workflowID, err)
}

// reclaimLatency sends a late result to each job, one every interval, waits for every reclaim row
// and answers the latencies (created_at of the row minus the send time).
func (b *bench) reclaimLatency(ctx context.Context, ids, workflowIDs []string, interval time.Duration) (Latency, error) {
	sent, err := b.sendResults(ctx, ids, workflowIDs, interval)
	if err != nil {
		return Latency{}, err
	}
	if err := b.awaitStates(ctx, ids, ledgerdb.StateRecovered, len(ids), 5*time.Minute); err != nil {
		return Latency{}, err
	}
	rows, err := b.ledger.Pool().Query(ctx,
		"SELECT job_id, created_at FROM ledger_entries WHERE kind = 'reclaim' AND job_id = ANY($1)", b.keys(ids))
	if err != nil {
		return Latency{}, err
	}
	defer rows.Close()
	var lats []time.Duration
	for rows.Next() {
		var key string
		var at time.Time
		if err := rows.Scan(&key, &at); err != nil {
			return Latency{}, err
		}
		lats = append(lats, at.Sub(sent[jobOfKey(key)]))
	}
	if err := rows.Err(); err != nil {
		return Latency{}, err
	}
	if len(lats) != len(ids) {
		return Latency{}, fmt.Errorf("%d reclaim rows for %d jobs", len(lats), len(ids))
	}
	slices.Sort(lats)
	return Latency{Jobs: len(lats), P50: rank(lats, 0.50), P95: rank(lats, 0.95), P99: rank(lats, 0.99), Max: lats[len(lats)-1]}, nil
}

// awaitStates polls the ledger until want of the jobs are in state, for at most limit.
func (b *bench) awaitStates(ctx context.Context, ids []string, state ledgerdb.State, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	keys := b.keys(ids)
	for {
		var got int
		if err := b.ledger.Pool().QueryRow(ctx,
			"SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = $2", keys, string(state)).Scan(&got); err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting: %d of %d jobs %s after %s", got, want, state, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// databaseSizes is the size of each database the run's CPU meter watches.
func (b *bench) databaseSizes(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, db := range b.meter.databases {
		var size int64
		if err := b.ledger.Pool().QueryRow(ctx, "SELECT pg_database_size($1)", db).Scan(&size); err != nil {
			return nil, fmt.Errorf("the size of %s: %w", db, err)
		}
		out[db] = size
	}
	return out, nil
}

// keys are the ledger keys of the run's jobs ids.
func (b *bench) keys(ids []string) []string {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = b.key(id)
	}
	return keys
}

// processRSS is a process's resident set in bytes, from /proc/<pid>/status.
func processRSS(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

func sizes(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, k+" "+mib(m[k]))
	}
	return strings.Join(parts, ", ")
}
