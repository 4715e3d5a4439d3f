// Package workerbench benchmarks the metered job workflow on a real Temporal server and a real
// ledger, in one run:
//
//   - throughput: metered jobs per second, from submission through the job service to the settled
//     workflow, against a bare workflow that runs only the work activity ([BareJob]); the sides
//     alternate round by round (bare, metered, bare, metered) so that a noisy machine hits both,
//     and the medians are compared.
//   - latency: from sending a result signal to a refunded job that is listening for a late
//     result, to the reclaim row in Postgres.
//
// Afterwards it checks the money: every job's ledger rows and every account's audit.
package workerbench

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// Config says what to run. Zero fields take the defaults noted.
type Config struct {
	// DatabaseURL is the ledger's Postgres. The run writes fresh accounts and jobs (the ledger
	// never deletes), so use the service's database, never the tests'.
	DatabaseURL string
	// TemporalAddress is the frontend's host:port.
	TemporalAddress string
	// Namespace holds the run's workflows; workflows.DefaultNamespace when empty.
	Namespace string
	// TaskQueuePrefix starts the run's task queues, which end in a run ID so that no other worker
	// takes the run's tasks; "jobbill-bench" when empty.
	TaskQueuePrefix string

	// Jobs is how many jobs each side runs per round (default 200).
	Jobs int
	// Concurrency is how many submitters run at once, each submitting a job and waiting for it
	// to settle before the next (default 20).
	Concurrency int
	// Rounds is how many times each side runs (default 2: bare, metered, then metered, bare).
	Rounds int
	// Warmup is how many jobs each side runs before the first round, not counted (default 20;
	// negative for none).
	Warmup int
	// WorkDuration is how long the simulated work takes (default 5 ms): tiny, so that the
	// comparison measures the orchestration and the billing, not the GPU.
	WorkDuration time.Duration
	// Cost is each job's price in credits (default 10): the run sells its jobs as the kind
	// "workerbench-<cost>", by the job, at this price.
	Cost int64

	// LatencyJobs is how many refunded jobs get a result signal (default 150; negative for
	// none).
	LatencyJobs int
	// SignalInterval spaces the result signals (default 100 ms), which are sent one after another,
	// each without waiting for the previous job to settle.
	SignalInterval time.Duration
	// Webhooks measures the latency a second time with webhook delivery on (webhooks.go).
	Webhooks bool

	// WorkflowCacheSize sizes the worker's workflow cache (sdkworker.SetStickyWorkflowCacheSize)
	// when above 0, as temporal.workflow_cache_size does the product's worker; the SDK's default
	// (10,000) otherwise.
	WorkflowCacheSize int

	// Processes says where the processes whose CPU each job costs are (cost.go).
	Processes ProcessConfig
	// Waiting, when its Jobs is set, runs the many-waiting-jobs measurement instead (waiting.go).
	Waiting WaitingConfig
}

func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = workflows.DefaultNamespace
	}
	if c.TaskQueuePrefix == "" {
		c.TaskQueuePrefix = "jobbill-bench"
	}
	if c.Jobs <= 0 {
		c.Jobs = 200
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 20
	}
	if c.Rounds <= 0 {
		c.Rounds = 2
	}
	if c.Warmup == 0 {
		c.Warmup = 20
	}
	if c.WorkDuration <= 0 {
		c.WorkDuration = 5 * time.Millisecond
	}
	if c.Cost <= 0 {
		c.Cost = 10
	}
	if c.LatencyJobs == 0 {
		c.LatencyJobs = 150
	}
	if c.SignalInterval <= 0 {
		c.SignalInterval = 100 * time.Millisecond
	}
	if c.Processes.HistorySample == 0 {
		c.Processes.HistorySample = 20
	}
	return c
}

func (c Config) validate() error {
	if c.DatabaseURL == "" || c.TemporalAddress == "" {
		return errors.New("workerbench: the database URL and the Temporal address are required")
	}
	return nil
}

// Round is one side's run of Config.Jobs jobs.
type Round struct {
	// Round counts from 1.
	Round int
	// Side is "bare" or "metered".
	Side string
	// Jobs is how many jobs settled.
	Jobs int
	// Elapsed is from the first submission to the last job settled.
	Elapsed time.Duration
	// JobsPerSec is Jobs / Elapsed.
	JobsPerSec float64
	// Quiet is how long after the round's last job the Temporal server went quiet; the round's
	// CPU figures count until then.
	Quiet time.Duration
}

// Latency is the time from sending a result signal to a refunded, listening job to the start
// of the transaction that wrote its reclaim row, by Postgres' clock.
type Latency struct {
	// Jobs is how many signals were measured; 0 when none were.
	Jobs int
	// P50, P95, P99 and Max are nearest-rank percentiles (goal: P99 ≤ 50 ms on an idle machine).
	P50, P95, P99, Max time.Duration
}

// ClockCheck compares this process's wall clock with Postgres' (clock_timestamp()), over the
// fastest of a few round trips: the latency measurement subtracts one from the other.
type ClockCheck struct {
	// Offset is Postgres' clock minus ours at the middle of the round trip.
	Offset time.Duration
	// RoundTrip bounds the error of Offset (±RoundTrip/2).
	RoundTrip time.Duration
}

// Result is what a run measured.
type Result struct {
	// RunID names the run's task queues, accounts and job IDs.
	RunID string
	// Rounds lists every counted round in the order run.
	Rounds []Round
	// BareMedianJobsPerSec is the median of the bare rounds.
	BareMedianJobsPerSec float64
	// MeteredMedianJobsPerSec is the median of the metered rounds.
	MeteredMedianJobsPerSec float64
	// Ratio is MeteredMedianJobsPerSec over BareMedianJobsPerSec (goal ≥ 0.95 on an idle machine).
	Ratio float64
	// Latency is the result-signal-to-reclaim latency (webhook delivery off).
	Latency Latency
	// Clock is the clock comparison behind Latency.
	Clock ClockCheck
	// JobsChecked is how many metered jobs had their ledger rows checked, all correct.
	JobsChecked int
	// AccountsAudited is how many accounts passed their audit.
	AccountsAudited int
	// Webhooks is the same latency with webhook delivery on, when Config.Webhooks.
	Webhooks WebhookRun
	// JobCost is what each job cost the server and Postgres, and its history.
	JobCost JobCost
	// CPURatio is JobCost.CPURatio: the bare workflow's machine CPU per job over the metered
	// job's (goal ≥ 0.95 on an idle machine).
	CPURatio float64
	// Waiting is the many-waiting-jobs measurement, when it ran.
	Waiting WaitingResult
}

// Run runs the benchmark and prints its progress and figures to out. It fails if any job ends
// in an unexpected state or the money check finds anything wrong.
func Run(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	b := &bench{cfg: cfg, out: out, runID: newRunID(), expected: map[string]expectation{}}
	res := Result{RunID: b.runID}

	ledger, err := ledgerdb.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return res, err
	}
	defer ledger.Close()
	b.ledger = ledger
	tc, err := client.DialContext(ctx, client.Options{
		HostPort:  cfg.TemporalAddress,
		Namespace: cfg.Namespace,
		// Silent: the latency jobs' failing attempts are logged at error level by design, and
		// hundreds of those lines would bury the figures; failures reach Run as errors anyway.
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return res, fmt.Errorf("connecting to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()
	b.tc = tc
	// The server's version, for the run's conditions; "unknown" when it does not say.
	b.serverVersion = "unknown"
	if info, err := tc.WorkflowService().GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{}); err == nil && info.GetServerVersion() != "" {
		b.serverVersion = info.GetServerVersion()
	}

	if cfg.Waiting.Jobs > 0 {
		fmt.Fprintf(out, "workerbench %s: %d jobs waiting for a late result, %d submitters, task queue %s\n",
			b.runID, cfg.Waiting.Jobs, cfg.Concurrency, b.taskQueue())
	} else {
		fmt.Fprintf(out, "workerbench %s: %d jobs per side and round, %d submitters, %d rounds, work %s, task queue %s\n",
			b.runID, cfg.Jobs, cfg.Concurrency, cfg.Rounds, cfg.WorkDuration, b.taskQueue())
	}
	if err := b.openAccounts(ctx); err != nil {
		return res, err
	}
	w, err := b.startWorker()
	if err != nil {
		return res, err
	}
	defer w.Stop()

	if res.Clock, err = b.checkClock(ctx); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "clock: Postgres minus this process %s (round trip %s)\n", res.Clock.Offset, res.Clock.RoundTrip)
	b.meter = b.newCPUMeter()

	if cfg.Waiting.Jobs > 0 {
		if res.Waiting, err = b.runWaiting(ctx); err != nil {
			return res, err
		}
		res.JobsChecked, res.AccountsAudited, err = b.checkMoney(ctx)
		return res, err
	}

	if cfg.Warmup > 0 {
		for _, side := range sides {
			if _, err := b.round(ctx, 0, side, cfg.Warmup); err != nil {
				return res, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	perSide := map[string][]float64{}
	for r := 1; r <= cfg.Rounds; r++ {
		for _, side := range roundOrder(r) {
			rd, err := b.round(ctx, r, side, cfg.Jobs)
			if err != nil {
				return res, err
			}
			fmt.Fprintf(out, "round %d  %-8s %4d jobs in %7.2fs = %6.2f jobs/s (server quiet %.1fs after)\n",
				r, side, rd.Jobs, rd.Elapsed.Seconds(), rd.JobsPerSec, rd.Quiet.Seconds())
			res.Rounds = append(res.Rounds, rd)
			perSide[rd.Side] = append(perSide[rd.Side], rd.JobsPerSec)
		}
	}
	if cfg.Processes.HistorySample > 0 {
		for _, side := range sides {
			if err := b.countEvents(ctx, side, b.sampleIDs(side, cfg.Rounds, cfg.Jobs)); err != nil {
				return res, err
			}
		}
	}
	res.BareMedianJobsPerSec = median(perSide[bareSide])
	res.MeteredMedianJobsPerSec = median(perSide[meteredSide])
	res.Ratio = res.MeteredMedianJobsPerSec / res.BareMedianJobsPerSec

	if cfg.LatencyJobs > 0 {
		if res.Latency, err = b.latency(ctx, "late"); err != nil {
			return res, err
		}
		if cfg.Webhooks {
			if res.Webhooks, err = b.withWebhooks(ctx); err != nil {
				return res, err
			}
		}
	}

	if res.JobsChecked, res.AccountsAudited, err = b.checkMoney(ctx); err != nil {
		return res, err
	}
	res.JobCost = b.meter.perJob()
	res.CPURatio = res.JobCost.CPURatio()
	b.print(res)
	b.printCost(res.JobCost)
	b.printGoals(res)
	return res, nil
}

// The two sides of the comparison, in the order the warm-up runs them.
const (
	bareSide    = "bare"
	meteredSide = "metered"
)

var sides = []string{bareSide, meteredSide}

// roundOrder is the order round r runs the sides in: the bare workflow first in odd rounds, the
// metered job first in even ones. A machine's cost drifts over a run — the Temporal server's store
// grows with every job — and a fixed order charged the drift since each round's first side to
// the side that always ran second; alternated, an even number of rounds weighs it on both sides
// alike.
func roundOrder(r int) []string {
	if r%2 == 1 {
		return sides
	}
	return []string{meteredSide, bareSide}
}

// expectation is how a metered job must end, for the money check.
type expectation struct {
	account string
	state   ledgerdb.State
}

type bench struct {
	cfg      Config
	out      io.Writer
	runID    string
	ledger   *ledgerdb.Store
	tc       client.Client
	accounts []string
	// kind is the price list's kind the run's jobs name.
	kind string
	// jobs submits throughput jobs, latencyJobs refunded-and-listening ones.
	jobs        *jobs.Service
	latencyJobs *jobs.Service

	mu       sync.Mutex
	expected map[string]expectation
	// meter reads the CPU of the processes behind the run (cost.go).
	meter *cpuMeter
	// serverVersion is the Temporal server's version, as it reports it.
	serverVersion string
}

func newRunID() string {
	var r [3]byte
	_, _ = rand.Read(r[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(r[:])
}

func (b *bench) taskQueue() string {
	return fmt.Sprintf("%s-%s", b.cfg.TaskQueuePrefix, b.runID)
}

// grantPerAccount is each account's credit: far more than any run spends, so that no charge is
// refused.
const grantPerAccount = 1_000_000_000

// openAccounts opens one account per submitter, so that concurrent charges do not all queue on
// one balance row (a hot spot no real tenant mix has), and grants them credits.
func (b *bench) openAccounts(ctx context.Context) error {
	b.kind = fmt.Sprintf("workerbench-%d", b.cfg.Cost)
	price := ledgerdb.Price{Kind: b.kind, Unit: ledgerdb.UnitJob, UnitPrice: b.cfg.Cost, MaxUnits: 1, Memo: "workerbench"}
	if _, _, err := b.ledger.SetPrice(ctx, price); err != nil {
		return fmt.Errorf("setting the price of %s: %w", b.kind, err)
	}
	for i := range b.cfg.Concurrency {
		id := fmt.Sprintf("wb-%s-a%02d", b.runID, i)
		if _, err := b.ledger.OpenAccount(ctx, id); err != nil {
			return fmt.Errorf("opening account %s: %w", id, err)
		}
		if _, err := b.ledger.Grant(ctx, ledgerdb.Credit{AccountID: id, Amount: grantPerAccount, Key: "workerbench-grant", Memo: "workerbench " + b.runID}); err != nil {
			return fmt.Errorf("granting account %s: %w", id, err)
		}
		b.accounts = append(b.accounts, id)
	}
	return nil
}

// startWorker starts the run's worker on its own task queue: the metered job, the late-result
// fallback, the bare workflow and the activities, as worker.New registers them.
func (b *bench) startWorker() (sdkworker.Worker, error) {
	tq := b.taskQueue()
	if b.cfg.WorkflowCacheSize > 0 {
		sdkworker.SetStickyWorkflowCacheSize(b.cfg.WorkflowCacheSize)
	}
	// With the product worker's build ID (worker.New), which keeps each metered run's version.
	w := sdkworker.New(b.tc, tq, sdkworker.Options{DeploymentOptions: workflows.WorkerDeploymentOptions()})
	w.RegisterWorkflow(workflows.MeteredJob)
	w.RegisterWorkflow(workflows.LateResult)
	w.RegisterWorkflowWithOptions(BareJob, workflow.RegisterOptions{Name: BareWorkflowType})
	w.RegisterActivity(&activities.Activities{Ledger: b.ledger, Runner: &activities.SimulatedRunner{Duration: b.cfg.WorkDuration}})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting the worker: %w", err)
	}
	b.jobs = jobs.New(jobs.Options{Temporal: b.tc, Ledger: b.ledger, TaskQueue: tq, Namespace: b.cfg.Namespace, Policy: b.throughputPolicy()})
	b.latencyJobs = jobs.New(jobs.Options{Temporal: b.tc, Ledger: b.ledger, TaskQueue: tq, Namespace: b.cfg.Namespace, Policy: latencyPolicy})
	return w, nil
}

// throughputPolicy is the work's policy in the throughput rounds, for both sides: the GPU
// defaults, whose first attempt always succeeds here ("sim:ok").
func (b *bench) throughputPolicy() workflows.Policy {
	return workflows.DefaultPolicy()
}

// latencyPolicy makes a "sim:fail" job refunded after its one attempt, and keeps it listening
// for a late result far longer than the measurement takes.
var latencyPolicy = workflows.Policy{
	InitialInterval:    time.Second,
	BackoffCoefficient: 2,
	MaximumInterval:    time.Second,
	MaximumAttempts:    1,
	StartToClose:       30 * time.Second,
	HeartbeatTimeout:   10 * time.Second,
	LateResultWindow:   time.Hour,
}

// round runs n jobs of one side with Config.Concurrency submitters; round 0 is the warm-up.
func (b *bench) round(ctx context.Context, r int, side string, n int) (Round, error) {
	prefix := fmt.Sprintf("wb-%s-%s-r%d-", b.runID, side, r)
	job := func(ctx context.Context, i int) error {
		id := fmt.Sprintf("%s%05d", prefix, i)
		if side == bareSide {
			return b.bareJob(ctx, id)
		}
		return b.meteredJob(ctx, id, b.accounts[i%len(b.accounts)])
	}
	before, err := b.meter.read(ctx)
	if err != nil {
		return Round{}, err
	}
	start := time.Now()
	if err := forEach(ctx, n, b.cfg.Concurrency, job); err != nil {
		return Round{}, fmt.Errorf("round %d, %s: %w", r, side, err)
	}
	elapsed := time.Since(start)
	// The round's CPU counts until the server has done the work its jobs left behind (visibility
	// writes, task queues), so that none of it is charged to the round after.
	quiet, err := b.meter.awaitQuiet(ctx)
	if err != nil {
		return Round{}, err
	}
	after, err := b.meter.read(ctx)
	if err != nil {
		return Round{}, err
	}
	if r > 0 {
		b.meter.add(side, before, after, n)
	}
	return Round{Round: r, Side: side, Jobs: n, Elapsed: elapsed, JobsPerSec: float64(n) / elapsed.Seconds(), Quiet: quiet}, nil
}

// forEach runs job(0..n-1) on c goroutines and answers the first error.
func forEach(ctx context.Context, n, c int, job func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(c, n) {
		wg.Go(func() {
			for i := range next {
				if err := job(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

func (b *bench) bareJob(ctx context.Context, id string) error {
	run, err := b.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: b.taskQueue()},
		BareWorkflowType, activities.WorkRequest{InputRef: "sim:ok"}, b.throughputPolicy())
	if err != nil {
		return fmt.Errorf("starting %s: %w", id, err)
	}
	var res activities.WorkResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}

// meteredJob submits a job through the job service (placeholder, Update-With-Start, charge decided)
// and waits for its workflow to end delivered.
func (b *bench) meteredJob(ctx context.Context, id, account string) error {
	b.expect(id, account, ledgerdb.StateDelivered)
	sub, err := b.jobs.Submit(ctx, jobs.Job{ID: id, AccountID: account, Kind: b.kind, InputRef: "sim:ok"})
	if err != nil {
		return fmt.Errorf("submitting %s: %w", id, err)
	}
	if sub.Duplicate || sub.Status.State == ledgerdb.StateRejected {
		return fmt.Errorf("submitting %s: charge not taken: %+v", id, sub)
	}
	var st workflows.JobStatus
	if err := b.tc.GetWorkflow(ctx, workflows.JobWorkflowID(account, id), "").Get(ctx, &st); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	if st.State != ledgerdb.StateDelivered {
		return fmt.Errorf("%s ended %s, not delivered", id, st.State)
	}
	return nil
}

// key is the ledger's key of one of the run's jobs: the ledger stores a job under
// "<account>/<job>" (ledgerdb.JobKey), in jobs.id and ledger_entries.job_id alike.
func (b *bench) key(id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return ledgerdb.JobKey{AccountID: b.expected[id].account, JobID: id}.String()
}

// jobOfKey is the job's own ID in a ledger key.
func jobOfKey(key string) string {
	_, id, _ := strings.Cut(key, "/")
	return id
}

func (b *bench) expect(id, account string, state ledgerdb.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expected[id] = expectation{account: account, state: state}
}

// checkClock measures Postgres' clock against ours over the fastest of 31 round trips: both
// read the same kernel clock on this machine, so the offset should be within half a round trip
// of zero, and the latency figures take it as the error bar of the subtraction.
func (b *bench) checkClock(ctx context.Context) (ClockCheck, error) {
	best := ClockCheck{RoundTrip: time.Duration(math.MaxInt64)}
	for range 31 {
		var pg time.Time
		t1 := time.Now()
		if err := b.ledger.Pool().QueryRow(ctx, "SELECT clock_timestamp()").Scan(&pg); err != nil {
			return ClockCheck{}, fmt.Errorf("reading Postgres' clock: %w", err)
		}
		t2 := time.Now()
		if rtt := t2.Sub(t1); rtt < best.RoundTrip {
			best = ClockCheck{Offset: pg.Sub(t1.Round(0).Add(rtt / 2)), RoundTrip: rtt}
		}
	}
	return best, nil
}

// latency submits Config.LatencyJobs jobs whose work fails for good, waits until each is
// refunded and listening for a late result, then sends each a result signal, one every
// SignalInterval, and measures from the moment before SignalWorkflow was called to the
// created_at of the job's reclaim row.
//
// created_at is now() in the ledger's single-statement reclaim transaction: Postgres' clock when
// that transaction started, read from the same kernel clock as time.Now here (checkClock shows the
// offset), so no polling interval enters the figure. The commit follows within that one
// statement; a row that was never committed would not be found at all.
//
// label names the measurement in its jobs' IDs.
func (b *bench) latency(ctx context.Context, label string) (Latency, error) {
	n := b.cfg.LatencyJobs
	ids := make([]string, n)
	workflowIDs := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("wb-%s-%s-%05d", b.runID, label, i)
		workflowIDs[i] = workflows.JobWorkflowID(b.accounts[i%len(b.accounts)], ids[i])
	}
	st := b.latencyJobs
	err := forEach(ctx, n, b.cfg.Concurrency, func(ctx context.Context, i int) error {
		account := b.accounts[i%len(b.accounts)]
		b.expect(ids[i], account, ledgerdb.StateRecovered)
		if _, err := st.Submit(ctx, jobs.Job{ID: ids[i], AccountID: account, Kind: b.kind, InputRef: "sim:fail"}); err != nil {
			return fmt.Errorf("submitting %s: %w", ids[i], err)
		}
		return b.awaitListening(ctx, workflowIDs[i])
	})
	if err != nil {
		return Latency{}, fmt.Errorf("latency: %w", err)
	}
	// Let the last jobs' workflow tasks finish, so that each signal meets an idle job.
	time.Sleep(500 * time.Millisecond)

	sent, err := b.sendResults(ctx, ids, workflowIDs, b.cfg.SignalInterval)
	if err != nil {
		return Latency{}, err
	}
	err = forEach(ctx, n, b.cfg.Concurrency, func(ctx context.Context, i int) error {
		var js workflows.JobStatus
		if err := b.tc.GetWorkflow(ctx, workflowIDs[i], "").Get(ctx, &js); err != nil {
			return fmt.Errorf("%s: %w", ids[i], err)
		}
		if js.State != ledgerdb.StateRecovered {
			return fmt.Errorf("%s ended %s, not recovered", ids[i], js.State)
		}
		return nil
	})
	if err != nil {
		return Latency{}, fmt.Errorf("latency: %w", err)
	}

	keys := make([]string, n)
	for i := range n {
		keys[i] = b.key(ids[i])
	}
	rows, err := b.ledger.Pool().Query(ctx,
		"SELECT job_id, created_at FROM ledger_entries WHERE kind = 'reclaim' AND job_id = ANY($1)", keys)
	if err != nil {
		return Latency{}, err
	}
	var lats []time.Duration
	for rows.Next() {
		var key string
		var at time.Time
		if err := rows.Scan(&key, &at); err != nil {
			rows.Close()
			return Latency{}, err
		}
		lats = append(lats, at.Sub(sent[jobOfKey(key)]))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Latency{}, err
	}
	if len(lats) != n {
		return Latency{}, fmt.Errorf("latency: %d reclaim rows for %d jobs", len(lats), n)
	}
	if k := min(b.cfg.Processes.HistorySample, n); k > 0 {
		if err := b.countEvents(ctx, recoveredSide, workflowIDs[:k]); err != nil {
			return Latency{}, err
		}
	}
	slices.Sort(lats)
	l := Latency{Jobs: n, P50: rank(lats, 0.50), P95: rank(lats, 0.95), P99: rank(lats, 0.99), Max: lats[n-1]}
	fmt.Fprintf(b.out, "latency  %4d signals: p50 %s  p95 %s  p99 %s  max %s\n",
		n, ms(l.P50), ms(l.P95), ms(l.P99), ms(l.Max))
	return l, nil
}

// awaitListening waits until the job's workflow says it is refunded and dead-lettered: it set
// that state right before it started listening, and a query is answered only between workflow
// tasks, so the workflow is then waiting for a late result.
func (b *bench) awaitListening(ctx context.Context, workflowID string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, err := b.tc.QueryWorkflow(ctx, workflowID, "", workflows.QueryStatus)
		if err != nil {
			return fmt.Errorf("querying %s: %w", workflowID, err)
		}
		var st workflows.JobStatus
		if err := v.Get(&st); err != nil {
			return err
		}
		if st.State == ledgerdb.StateRefunded && st.DeadLettered {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is still %s after 2 minutes", workflowID, st.State)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkMoneySQL reads the submitted jobs' rows for checkMoney (check_money.sql says what).
//
//go:embed check_money.sql
var checkMoneySQL string

// checkMoney checks every metered job's rows — one charge; for a delivered job nothing else,
// for a recovered one exactly one refund and one reclaim; the job's net -cost (the
// reversing-pairs and net-effect rules) — and audits every account, whose balance must also be the
// grant less every job's cost.
func (b *bench) checkMoney(ctx context.Context) (jobs, accounts int, err error) {
	ids := make([]string, 0, len(b.expected))
	keys := make([]string, 0, len(b.expected))
	spent := map[string]int64{}
	for id, e := range b.expected {
		ids = append(ids, id)
		keys = append(keys, b.key(id))
		spent[e.account] += b.cfg.Cost
	}
	rows, err := b.ledger.Pool().Query(ctx, checkMoneySQL, keys)
	if err != nil {
		return 0, 0, err
	}
	var problems []string
	found := map[string]bool{}
	for rows.Next() {
		var (
			id, account, state                  string
			charges, refunds, reclaims, entries int
			net                                 int64
		)
		if err := rows.Scan(&id, &account, &state, &charges, &refunds, &reclaims, &entries, &net); err != nil {
			rows.Close()
			return 0, 0, err
		}
		id = jobOfKey(id)
		found[id] = true
		e := b.expected[id]
		want := [3]int{1, 0, 0}
		if e.state == ledgerdb.StateRecovered {
			want = [3]int{1, 1, 1}
		}
		got := [3]int{charges, refunds, reclaims}
		if state != string(e.state) || account != e.account || got != want || entries != want[0]+want[1]+want[2] || net != -b.cfg.Cost {
			problems = append(problems, fmt.Sprintf("%s: %s on %s, charge/refund/reclaim rows %v of %d, net %d; want %s on %s, %v, net %d",
				id, state, account, got, entries, net, e.state, e.account, want, -b.cfg.Cost))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	for _, id := range ids {
		if !found[id] {
			problems = append(problems, id+": not in the ledger")
		}
	}
	for _, acct := range b.accounts {
		rep, err := b.ledger.Audit(ctx, acct)
		if err != nil {
			return 0, 0, err
		}
		if !rep.OK() {
			problems = append(problems, fmt.Sprintf("audit of %s: %v", acct, rep.Violations))
		}
		if want := grantPerAccount - spent[acct]; rep.Balance != want {
			problems = append(problems, fmt.Sprintf("%s: balance %d, want %d", acct, rep.Balance, want))
		}
	}
	if len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
		}
		return 0, 0, fmt.Errorf("money check failed:\n  %s", strings.Join(problems, "\n  "))
	}
	fmt.Fprintf(b.out, "money: %d metered jobs have exactly their rows (one charge each; refund and reclaim on the %d signalled ones); %d accounts audit clean with the expected balances\n",
		len(ids), countState(b.expected, ledgerdb.StateRecovered), len(b.accounts))
	return len(ids), len(b.accounts), nil
}

// The goals a metered job is held to on an idle machine: the ledger's guarantees cost at most a
// twentieth of a bare workflow's throughput, and a late result is reclaimed within 50 ms.
const (
	ratioGoal = 0.95
	p99Goal   = 50 * time.Millisecond
)

func (b *bench) print(res Result) {
	fmt.Fprintf(b.out, "\nthroughput (median of %d rounds, %d jobs each, %d submitters):\n", b.cfg.Rounds, b.cfg.Jobs, b.cfg.Concurrency)
	fmt.Fprintf(b.out, "  %-8s %6.2f jobs/s\n", bareSide, res.BareMedianJobsPerSec)
	verdict := "meets"
	if res.Ratio < ratioGoal {
		verdict = "misses"
	}
	fmt.Fprintf(b.out, "  %-8s %6.2f jobs/s  = %.2fx bare (%s the %.2fx goal)\n", meteredSide, res.MeteredMedianJobsPerSec, res.Ratio, verdict, ratioGoal)
	if l := res.Latency; l.Jobs > 0 {
		verdict := "meets"
		if l.P99 > p99Goal {
			verdict = "misses"
		}
		fmt.Fprintf(b.out, "result signal -> reclaim row (Postgres created_at minus send time; clock offset %s, round trip %s):\n", res.Clock.Offset, res.Clock.RoundTrip)
		fmt.Fprintf(b.out, "  n=%d  p50 %s  p95 %s  p99 %s  max %s (%s the p99 <= %s goal)\n",
			l.Jobs, ms(l.P50), ms(l.P95), ms(l.P99), ms(l.Max), verdict, ms(p99Goal))
	}
	b.printWebhooks(res)
}

func countState(m map[string]expectation, s ledgerdb.State) int {
	n := 0
	for _, e := range m {
		if e.state == s {
			n++
		}
	}
	return n
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rank is the nearest-rank percentile p of sorted.
func rank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// sendResults sends a late result to each job, one every interval, and answers when each was
// sent, by job ID. Round(0) drops the monotonic reading: the latency is the reclaim row's
// created_at minus this time, wall clock against wall clock, as Postgres' is.
func (b *bench) sendResults(ctx context.Context, ids, workflowIDs []string, interval time.Duration) (map[string]time.Time, error) {
	sent := make(map[string]time.Time, len(ids))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i, id := range ids {
		if i > 0 {
			<-tick.C
		}
		t0 := time.Now()
		sig := workflows.ResultSignal{Attempt: 1, OutputRef: "sim://" + id + "/late", FinishedAt: t0}
		if err := b.tc.SignalWorkflow(ctx, workflowIDs[i], "", workflows.SignalResult, sig); err != nil {
			return nil, fmt.Errorf("signalling %s: %w", id, err)
		}
		sent[id] = t0.Round(0)
	}
	return sent, nil
}
