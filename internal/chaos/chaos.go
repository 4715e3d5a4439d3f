// Package chaos is jobbill's chaos run: N jobs through real `jobbill worker` processes and the
// simulated runner, while the run kills workers with SIGKILL, restarts its own Temporal dev server
// (and, when asked, Postgres), reports results while that server is down and twice, deletes settled
// jobs and resubmits their IDs, resubmits live IDs, writes orphaned placeholders, and acts as an
// operator would in the Temporal UI: terminates jobs' running workflows and resets them to their
// first workflow task. Healing is left to what a deployment has when nobody looks at the jobs: the
// reconcile schedule the workers create, with short settings. The driver follows jobs in the ledger
// and through Temporal's describe, never through the job service's status read, which heals on
// read (unless [Config.Reads] asks for it). It waits until the run is at rest — every fault
// repaired within a bounded number of scheduled passes — checks that every terminated job was
// refunded (or settled by its result) and every result recorded while Temporal was down was
// billed, and runs the invariant checker scoped to the run's job-ID prefix and task queue. Every
// choice (scenarios, which jobs get which injection, when each injection fires) comes from the
// seed, so a run can be repeated.
package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/app"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/internal/devserver"
	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// Injection kinds, as counted in [Report.Injections] and printed on each line.
const (
	KindKillWorker      = "kill_worker"      // a worker process SIGKILLed (then restarted)
	KindRestartWorker   = "restart_worker"   // a worker process started again by the supervisor
	KindDuplicateResult = "duplicate_result" // ReportResult twice, concurrently, for one job
	KindDeleteResubmit  = "delete_resubmit"  // a settled job deleted, its ID resubmitted (ErrGone)
	KindResubmitLive    = "resubmit_live"    // a live job's ID resubmitted (the original answered)
	KindRestartTemporal = "restart_temporal" // the run's dev server stopped and started on its file store
	KindRestartPostgres = "restart_postgres" // the Postgres cluster restarted
	KindOrphan          = "orphan"           // a placeholder written with no workflow
	KindRecordedResult  = "recorded_result"  // a result reported while the dev server was down (answered recorded)
	KindTerminate       = "terminate"        // an operator terminated a job's running workflow
	KindReset           = "reset"            // an operator reset a job's running workflow to its first workflow task
)

// BuildProduct builds the product binary, jobbill (./cmd/jobbill), into dir with the go toolchain
// and answers its path: the binary the run's workers are, which the tooling that drives them is
// not.
func BuildProduct(dir string) (string, error) {
	bin := filepath.Join(dir, "jobbill")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/jobbill/jobbill/cmd/jobbill").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building jobbill: %w\n%s", err, out)
	}
	return bin, nil
}

// Config is one chaos run. Zero fields take the defaults of [DefaultConfig].
type Config struct {
	// Binary is the jobbill binary the workers run (`<Binary> worker`). Required: the run builds
	// nothing itself ([BuildProduct] does).
	Binary string
	// TemporalBinary is the Temporal CLI that runs the run's own dev server; empty looks up
	// `temporal` on PATH, then $(go env GOPATH)/bin/temporal.
	TemporalBinary string
	// DatabaseURL is the ledger as the application role, for the workers and the driver.
	DatabaseURL string
	// MigrateDatabaseURL is the ledger as its owner; when set, the run migrates it first.
	MigrateDatabaseURL string
	// Jobs is how many jobs are submitted.
	Jobs int
	// Seed makes every choice of the run repeatable.
	Seed uint64
	// Concurrency is how many submissions may be in flight at once.
	Concurrency int
	// Rate is how many jobs are submitted per second; it spreads the jobs, and so the
	// injections, over Jobs/Rate seconds.
	Rate float64
	// Policy is the jobs' retry policy and late-result window. It travels with each job from the
	// driver's job service, and the workers get it too (JOBBILL_POLICY_*); zero fields take
	// [DefaultPolicy]'s.
	Policy workflows.Policy
	// SimulatedDuration is how long a simulated attempt works.
	SimulatedDuration time.Duration
	// LateBy is how long after its deadline a "sim:late:N" result lands.
	LateBy time.Duration
	// KillEvery is the mean time between two SIGKILLs of a worker; at least one kill happens.
	KillEvery time.Duration
	// RestartTemporal restarts the run's own dev server once, mid-run.
	RestartTemporal bool
	// RestartPostgres restarts Postgres once, mid-run, with PostgresRestartCommand. Only safe when
	// nothing else uses the cluster, so it is off unless asked for.
	RestartPostgres bool
	// PostgresRestartCommand restarts the cluster; `pg_ctlcluster 15 main restart` when empty.
	PostgresRestartCommand []string
	// Orphans is how many placeholders without a workflow the run writes on purpose.
	Orphans int
	// OutageResults is how many results the run reports while its dev server is down (with
	// RestartTemporal): each must be recorded in the ledger's inbox and applied by the pass.
	OutageResults int
	// Reads makes the driver follow jobs as a user polling them does, through the job service's
	// status read, which heals a job on read: it waits on the jobs it deletes with Service.Wait and
	// reads each terminated job until it is settled. Off (the default), the driver reads the ledger
	// and Temporal's describe directly, and only the workers' scheduled reconcile pass heals, as in
	// a deployment where nobody looks at the jobs.
	Reads bool
	// PassInterval, PassGrace and PassResultGrace are the workers' reconcile.interval,
	// reconcile.grace and reconcile.result_grace: the schedule they create runs the pass that heals
	// the run.
	PassInterval, PassGrace, PassResultGrace time.Duration
	// WorkDir keeps the dev server's store and the processes' logs; a fresh temporary directory
	// (removed afterwards) when empty.
	WorkDir string
	// QuiesceTimeout bounds the wait for every job to settle and every workflow to close.
	QuiesceTimeout time.Duration
}

// DefaultPolicy is the chaos run's short policy: three attempts of at most three seconds and a
// late-result window of eight, so that every scenario settles within seconds.
func DefaultPolicy() workflows.Policy {
	return workflows.Policy{
		InitialInterval:    500 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Second,
		MaximumAttempts:    3,
		StartToClose:       3 * time.Second,
		HeartbeatTimeout:   2 * time.Second,
		LateResultWindow:   8 * time.Second,
	}
}

// DefaultConfig is a CI-sized run: 200 jobs over about 50 seconds, Temporal restarted, Postgres
// not, reads off, a scheduled pass every two seconds.
func DefaultConfig() Config {
	return Config{
		DatabaseURL:            config.Default().DatabaseURL,
		MigrateDatabaseURL:     config.Default().MigrateDatabaseURL,
		Jobs:                   200,
		Seed:                   1,
		Concurrency:            16,
		Rate:                   4,
		Policy:                 DefaultPolicy(),
		SimulatedDuration:      500 * time.Millisecond,
		LateBy:                 time.Second,
		KillEvery:              10 * time.Second,
		RestartTemporal:        true,
		PostgresRestartCommand: []string{"pg_ctlcluster", "15", "main", "restart"},
		Orphans:                3,
		OutageResults:          4,
		PassInterval:           2 * time.Second,
		PassGrace:              3 * time.Second,
		PassResultGrace:        time.Second,
		QuiesceTimeout:         5 * time.Minute,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.DatabaseURL == "" {
		c.DatabaseURL = d.DatabaseURL
	}
	if c.Jobs <= 0 {
		c.Jobs = d.Jobs
	}
	if c.Concurrency <= 0 {
		c.Concurrency = d.Concurrency
	}
	if c.Rate <= 0 {
		c.Rate = d.Rate
	}
	c.Policy = c.Policy.Or(d.Policy)
	if c.SimulatedDuration <= 0 {
		c.SimulatedDuration = d.SimulatedDuration
	}
	if c.LateBy <= 0 {
		c.LateBy = d.LateBy
	}
	if c.KillEvery <= 0 {
		c.KillEvery = d.KillEvery
	}
	if len(c.PostgresRestartCommand) == 0 {
		c.PostgresRestartCommand = d.PostgresRestartCommand
	}
	if c.Orphans <= 0 {
		c.Orphans = d.Orphans
	}
	if c.OutageResults <= 0 {
		c.OutageResults = d.OutageResults
	}
	if c.PassInterval <= 0 {
		c.PassInterval = d.PassInterval
	}
	if c.PassGrace <= 0 {
		c.PassGrace = d.PassGrace
	}
	if c.PassResultGrace <= 0 {
		c.PassResultGrace = d.PassResultGrace
	}
	if c.QuiesceTimeout <= 0 {
		c.QuiesceTimeout = d.QuiesceTimeout
	}
	return c
}

// Report is what a run did and what the checker found.
type Report struct {
	// Seed, Prefix and TaskQueue identify the run.
	Seed      uint64
	Prefix    string
	TaskQueue string
	// Jobs is how many jobs were submitted (orphans not included).
	Jobs int
	// Scenarios counts the jobs by scenario (the input reference without its usage), and
	// Metered how many of them were metered by the GPU-second.
	Scenarios map[string]int
	Metered   int
	// States counts the run's jobs (orphans included) by ledger state at the check.
	States map[ledgerdb.State]int
	// Injections counts what was injected, by kind (the Kind constants).
	Injections map[string]int
	// Orphans and OrphansHealed count the placeholders written on purpose and those that left
	// the submitting state through the reconcile pass.
	Orphans, OrphansHealed int
	// Terminated counts the jobs whose running workflow was terminated, by their ledger state at
	// the check: refunded (healed), or recovered or delivered when their result landed. A
	// terminated job left running was never healed, and is an anomaly.
	Terminated map[ledgerdb.State]int
	// Recorded counts the jobs whose result was reported while the dev server was down, by their
	// ledger state at the check: delivered or recovered once the pass applied the result. Any
	// other state means delivered work went unbilled, and is an anomaly.
	Recorded map[ledgerdb.State]int
	// Reads says whether the driver read jobs through the job service's healing status read.
	Reads bool
	// Passes is what the workers' scheduled reconcile passes did during the run (over every
	// account of the database).
	Passes PassTotals
	// Repaired counts the faults left for the pass (orphans, terminated jobs, recorded results,
	// jobs found running with no workflow) that were repaired, and MostPassesOutlasted the most
	// completed passes that had started after one of them became repairable and left it as it
	// was (at most HealPasses-1 in a clean run).
	Repaired, MostPassesOutlasted int
	// TransientErrors counts calls the driver retried (Temporal or Postgres being restarted).
	TransientErrors int64
	// Anomalies are wrong answers the driver saw: a deleted ID not answering ErrGone, a live
	// resubmission not answering the original, a job that never settled, a terminated job that
	// did not end refunded, delivered or recovered, a recorded result left unbilled, a fault that
	// HealPasses scheduled passes left as it was, a run not at rest within QuiesceTimeout.
	Anomalies []string
	// Violations are the invariant checker's findings.
	Violations []invariants.Violation
	// Elapsed is how long the run took.
	Elapsed time.Duration
}

// OK reports a clean run: no violation and no anomaly.
func (r Report) OK() bool { return len(r.Violations) == 0 && len(r.Anomalies) == 0 }

// jobPlan is what the seed decided for one job.
type jobPlan struct {
	job            jobs.Job
	duplicate      bool
	deleteAfter    bool
	resubmitLive   bool
	terminate      bool
	reset          bool
	followUpDelay  time.Duration
	submitAtOffset time.Duration
}

// timedInjection is a run-wide injection at an offset from the start of submissions.
type timedInjection struct {
	at      time.Duration
	kind    string
	worker  int        // for kills
	orphan  int        // for orphans
	results []jobs.Job // for the dev server's restart: the jobs whose results may be reported while it is down
}

type run struct {
	cfg       Config
	out       io.Writer
	start     time.Time
	prefix    string
	taskQueue string
	namespace string
	accounts  []string

	ledger *ledgerdb.Store
	tc     client.Client
	st     *jobs.Service
	server *devserver.Server
	procs  []*workerProc

	passes *passWatcher
	faults *faults

	mu         sync.Mutex
	injections map[string]int
	anomalies  []string
	submitted  map[string]bool   // the jobs whose submission has answered, by ID
	terminated []ledgerdb.JobKey // the jobs whose running workflow was terminated
	recorded   []ledgerdb.JobKey // the jobs whose result was recorded while the dev server was down
	transient  atomic.Int64
}

// event prints one line with the run's clock and counts it under kind.
func (r *run) event(kind, format string, args ...any) {
	r.mu.Lock()
	r.injections[kind]++
	r.mu.Unlock()
	r.logf(kind, format, args...)
}

// logf prints one line with the run's clock, as event does, without counting it.
func (r *run) logf(kind, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, "[%8.3fs] %-16s %s\n", time.Since(r.start).Seconds(), kind, fmt.Sprintf(format, args...))
}

func (r *run) anomaly(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.anomalies = append(r.anomalies, msg)
	r.mu.Unlock()
	r.event("ANOMALY", "%s", msg)
}

// Run performs one chaos run and writes its log to out. The error is for a run that could not be
// carried out (no binary, no database); broken money rules are in the Report, and zero violations
// and anomalies ([Report.OK]) is success.
func Run(ctx context.Context, cfg Config, out io.Writer) (Report, error) {
	cfg = cfg.withDefaults()
	if cfg.Binary == "" {
		return Report{}, errors.New("chaos: Config.Binary (the jobbill binary) is required")
	}
	tbin, err := devserver.CLI(cfg.TemporalBinary)
	if err != nil {
		return Report{}, fmt.Errorf("chaos: %w", err)
	}
	workDir := cfg.WorkDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "jobbill-chaos-"); err != nil {
			return Report{}, err
		}
		defer func() { _ = os.RemoveAll(workDir) }()
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return Report{}, err
	}

	// The prefix and queue must be unique to the run (runs share the ledger); the seed alone
	// decides everything else.
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := fmt.Sprintf("%d-%s", cfg.Seed, hex.EncodeToString(b[:]))
	r := &run{
		cfg: cfg, out: out, start: time.Now(), injections: map[string]int{}, submitted: map[string]bool{},
		prefix: "chaos-" + suffix + "-", taskQueue: "jobbill-chaos-" + suffix,
	}
	report := Report{Seed: cfg.Seed, Prefix: r.prefix, TaskQueue: r.taskQueue, Jobs: cfg.Jobs, Reads: cfg.Reads,
		Scenarios: map[string]int{}, States: map[ledgerdb.State]int{}, Terminated: map[ledgerdb.State]int{},
		Recorded: map[ledgerdb.State]int{}}
	reads := "off: only the workers' scheduled pass heals"
	if cfg.Reads {
		reads = "on: the driver reads jobs through the job service, which heals on read"
	}
	fmt.Fprintf(out, "chaos run: seed %d, %d jobs, prefix %s, task queue %s, work dir %s\n"+
		"reads %s; a scheduled pass every %s (grace %s, result grace %s)\n",
		cfg.Seed, cfg.Jobs, r.prefix, r.taskQueue, workDir, reads, cfg.PassInterval, cfg.PassGrace, cfg.PassResultGrace)

	wcfg := config.Default()
	wcfg.DatabaseURL = cfg.DatabaseURL
	wcfg.Temporal.TaskQueue = r.taskQueue
	r.namespace = wcfg.Temporal.Namespace
	wcfg.Policy = cfg.Policy
	wcfg.Reconcile = config.Reconcile{Interval: cfg.PassInterval, Grace: cfg.PassGrace, ResultGrace: cfg.PassResultGrace}
	if err := wcfg.Validate(); err != nil {
		return report, fmt.Errorf("chaos: the workers' configuration: %w", err)
	}

	if cfg.MigrateDatabaseURL != "" {
		if err := ledgerdb.Migrate(ctx, cfg.MigrateDatabaseURL); err != nil {
			return report, fmt.Errorf("chaos: migrating the ledger: %w", err)
		}
	}
	if r.ledger, err = ledgerdb.Open(ctx, cfg.DatabaseURL); err != nil {
		return report, fmt.Errorf("chaos: opening the ledger: %w", err)
	}
	defer r.ledger.Close()
	if err := ownDatabase(ctx, r.ledger); err != nil {
		return report, err
	}

	if r.server, err = devserver.New(tbin, workDir); err != nil {
		return report, err
	}
	if err := r.server.Start(ctx); err != nil {
		return report, err
	}
	defer r.server.Stop()
	fmt.Fprintf(out, "temporal dev server on %s (pid %d)\n", r.server.Address(), r.server.PID())

	wcfg.Temporal.Address = r.server.Address()
	if r.tc, err = app.Dial(ctx, wcfg, zap.NewNop(), nil); err != nil {
		return report, err
	}
	defer r.tc.Close()
	// The driver's job service carries the same short policy as the workers: the policy travels with
	// each job from its submitter.
	r.st = app.NewJobs(wcfg, r.tc, r.ledger, nil)

	plans, timeline := r.plan(&report)
	if err := r.openAccounts(ctx); err != nil {
		return report, err
	}

	env := workerEnv(wcfg, cfg)
	for i := range 2 {
		w := &workerProc{id: i + 1, bin: cfg.Binary, env: env, event: r.event,
			logFile: filepath.Join(workDir, fmt.Sprintf("worker-%d.log", i+1)), done: make(chan struct{})}
		r.procs = append(r.procs, w)
		go w.supervise()
	}
	defer func() {
		for _, w := range r.procs {
			w.stop()
		}
	}()

	// The scheduled passes are watched from the start: the faults the run leaves behind are
	// repaired by them while it goes on, and each must be within HealPasses of its own.
	r.passes = &passWatcher{tc: r.tc, log: r.logf}
	r.faults = &faults{}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	var watcher sync.WaitGroup
	watcher.Go(func() { r.watch(watchCtx) })

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var injectors sync.WaitGroup
	injectors.Go(func() { r.inject(runCtx, timeline) })
	var followUps sync.WaitGroup
	r.submitAll(runCtx, plans, &followUps)
	injectors.Wait()
	followUps.Wait()
	if ctx.Err() != nil {
		return report, ctx.Err()
	}

	r.settle(ctx)
	stopWatching()
	watcher.Wait()
	report.Orphans = cfg.Orphans
	report.OrphansHealed = r.orphansHealed(ctx)
	if report.OrphansHealed < cfg.Orphans {
		r.anomaly("only %d of %d orphans healed", report.OrphansHealed, cfg.Orphans)
	}
	r.mu.Lock()
	terminated, recorded := append([]ledgerdb.JobKey(nil), r.terminated...), append([]ledgerdb.JobKey(nil), r.recorded...)
	r.mu.Unlock()
	// A terminated job must never stay charged with no run to settle it (money rule 3): it ends
	// refunded, or settled by its result.
	r.countFinal(ctx, "terminated", terminated, report.Terminated, ledgerdb.StateRefunded, ledgerdb.StateRecovered, ledgerdb.StateDelivered)
	// A result taken into the inbox is delivered work: the job ends billed for it.
	r.countFinal(ctx, "recorded-result", recorded, report.Recorded, ledgerdb.StateRecovered, ledgerdb.StateDelivered)
	report.Passes = r.passes.figures()
	report.Repaired, report.MostPassesOutlasted = r.faults.figures()

	check, err := invariants.Check(ctx, invariants.Options{
		Ledger: r.ledger, Temporal: r.tc, Namespace: wcfg.Temporal.Namespace, TaskQueue: r.taskQueue,
		JobIDPrefix: r.prefix, StuckAfter: invariants.StuckAfterFor(cfg.Policy),
	})
	if err != nil {
		return report, fmt.Errorf("chaos: invariant check: %w", err)
	}
	if snap, err := r.ledger.LedgerSnapshot(ctx, ledgerdb.SnapshotScope{JobIDPrefix: r.prefix}); err == nil {
		for _, j := range snap.Jobs {
			report.States[j.Job.State]++
		}
	}
	_ = check.WriteText(out)

	r.mu.Lock()
	report.Injections = maps(r.injections)
	report.Anomalies = append([]string(nil), r.anomalies...)
	r.mu.Unlock()
	report.Violations = check.Violations
	report.TransientErrors = r.transient.Load()
	report.Elapsed = time.Since(r.start)
	writeSummary(out, report)
	return report, nil
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// workerEnv is the workers' environment: the driver's own without any JOBBILL_* variable (an
// operator's settings must not leak into the run), then the run's settings, among them the
// reconcile schedule's, which each worker creates or updates at start as in a deployment.
func workerEnv(w config.Config, c Config) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBBILL_") {
			env = append(env, kv)
		}
	}
	p := c.Policy
	set := map[string]string{
		"database_url":               w.DatabaseURL,
		"temporal.address":           w.Temporal.Address,
		"temporal.task_queue":        w.Temporal.TaskQueue,
		"metrics.listen":             "127.0.0.1:0",
		"log.level":                  "warn",
		"policy.initial_interval":    p.InitialInterval.String(),
		"policy.backoff_coefficient": fmt.Sprint(p.BackoffCoefficient),
		"policy.maximum_interval":    p.MaximumInterval.String(),
		"policy.maximum_attempts":    fmt.Sprint(p.MaximumAttempts),
		"policy.start_to_close":      p.StartToClose.String(),
		"policy.heartbeat_timeout":   p.HeartbeatTimeout.String(),
		"policy.late_result_window":  p.LateResultWindow.String(),
		"runner.kind":                "simulated",
		"runner.simulated.duration":  c.SimulatedDuration.String(),
		"runner.simulated.late_by":   c.LateBy.String(),
		"reconcile.interval":         w.Reconcile.Interval.String(),
		"reconcile.grace":            w.Reconcile.Grace.String(),
		"reconcile.result_grace":     w.Reconcile.ResultGrace.String(),
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, config.EnvName(k)+"="+set[k])
	}
	return env
}

// Scenario mix, in percent of the jobs on rich accounts; the rest of the 100 is "sim:ok".
var scenarioMix = []struct {
	ref     string
	percent int
}{
	{"sim:ok-on-attempt:2", 10},
	{"sim:ok-on-attempt:3", 5},
	{"sim:fail", 10},
	{"sim:hang", 7},
	{"sim:late:1", 6},
	{"sim:late:3", 10},
}

// The accounts: several rich ones, and one poor one whose jobs are mostly refused.
const (
	richAccounts = 4
	maxCost      = 50
	poorPercent  = 5
)

// The run's price list: "chaos-<cost>" sold by the job at 1 to maxCost credits, and
// "chaos-gpu" metered by the GPU-second, whose jobs report usages within, at and above the hold.
const (
	meteredKind     = "chaos-gpu"
	meteredPrice    = 2
	meteredMax      = 20
	meteredPercent  = 30
	maxMeteredUsage = 30
)

// fixedKind is the run's kind sold by the job at cost credits.
func fixedKind(cost int64) string { return fmt.Sprintf("chaos-%d", cost) }

// plan draws every choice of the run from the seed: each job's account, cost, scenario and
// follow-ups, and the timeline of run-wide injections.
func (r *run) plan(report *Report) ([]jobPlan, []timedInjection) {
	cfg := r.cfg
	rng := mrand.New(mrand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	for i := range richAccounts {
		r.accounts = append(r.accounts, fmt.Sprintf("%sacct-%d", r.prefix, i))
	}
	r.accounts = append(r.accounts, r.prefix+"acct-poor")

	phase := time.Duration(float64(cfg.Jobs) / cfg.Rate * float64(time.Second))
	plans := make([]jobPlan, cfg.Jobs)
	for i := range plans {
		p := &plans[i]
		p.submitAtOffset = time.Duration(float64(i) / cfg.Rate * float64(time.Second))
		p.job = jobs.Job{ID: fmt.Sprintf("%sj%05d", r.prefix, i), Kind: fixedKind(1 + rng.Int64N(maxCost)), InputRef: "sim:ok"}
		var usage string
		if rng.IntN(100) < meteredPercent {
			p.job.Kind = meteredKind
			usage = fmt.Sprintf("+used:%d", rng.Int64N(maxMeteredUsage+1))
		}
		if rng.IntN(100) < poorPercent {
			p.job.AccountID = r.accounts[richAccounts]
		} else {
			p.job.AccountID = r.accounts[rng.IntN(richAccounts)]
		}
		roll := rng.IntN(100)
		for _, s := range scenarioMix {
			if roll < s.percent {
				p.job.InputRef = s.ref + usage
				break
			}
			roll -= s.percent
		}
		switch roll := rng.IntN(100); {
		case roll < 8:
			p.duplicate = true
		case roll < 13:
			p.deleteAfter = true
		case roll < 18:
			p.resubmitLive = true
		case roll < 22:
			p.terminate = true
		case roll < 26:
			p.reset = true
		}
		p.followUpDelay = time.Duration(rng.Int64N(int64(4 * time.Second)))
		sc, _ := activities.ParseScenario(p.job.InputRef)
		sc.Used = nil
		report.Scenarios[sc.String()]++
		if p.job.Kind == meteredKind {
			report.Metered++
		}
	}
	// Every follow-up kind at least once, even in a tiny run. An operator's terminate or reset
	// goes to a job that is sure to be still running when it comes (a hanging or late one on a
	// rich account), so that it is a real one.
	if cfg.Jobs >= 5 {
		forced := map[int]bool{}
		for k, set := range []func(*jobPlan){
			func(p *jobPlan) { p.duplicate = true }, func(p *jobPlan) { p.deleteAfter = true }, func(p *jobPlan) { p.resubmitLive = true },
			func(p *jobPlan) { p.terminate = true }, func(p *jobPlan) { p.reset = true },
		} {
			i := (k + 1) * cfg.Jobs / 6
			if k >= 3 {
				i = r.longRunning(plans, i, forced)
			}
			forced[i] = true
			plans[i].clearFollowUps()
			set(&plans[i])
		}
	}

	var timeline []timedInjection
	for at := time.Duration(0); ; {
		at += time.Duration(float64(cfg.KillEvery) * (0.5 + rng.Float64()))
		if at >= phase && len(timeline) > 0 {
			break
		}
		timeline = append(timeline, timedInjection{at: min(at, phase), kind: KindKillWorker, worker: rng.IntN(2)})
	}
	if cfg.RestartTemporal {
		timeline = append(timeline, timedInjection{at: time.Duration(float64(phase) * (0.3 + 0.3*rng.Float64())), kind: KindRestartTemporal})
	}
	if cfg.RestartPostgres {
		timeline = append(timeline, timedInjection{at: time.Duration(float64(phase) * (0.5 + 0.3*rng.Float64())), kind: KindRestartPostgres})
	}
	for i := range cfg.Orphans {
		timeline = append(timeline, timedInjection{at: time.Duration(float64(phase) * rng.Float64()), kind: KindOrphan, orphan: i})
	}
	// Drawn last, so that they change none of the choices above.
	for i := range timeline {
		if timeline[i].kind == KindRestartTemporal {
			timeline[i].results = r.outageJobs(plans, rng)
		}
	}
	sort.SliceStable(timeline, func(a, b int) bool { return timeline[a].at < timeline[b].at })

	var dup, del, live, term, reset int
	for _, p := range plans {
		dup, del, live = dup+b2i(p.duplicate), del+b2i(p.deleteAfter), live+b2i(p.resubmitLive)
		term, reset = term+b2i(p.terminate), reset+b2i(p.reset)
	}
	fmt.Fprintf(r.out, "plan: scenarios %v (%d metered by the GPU-second); duplicate results for %d jobs, delete+resubmit %d, live resubmits %d, terminates %d, resets %d\n",
		report.Scenarios, report.Metered, dup, del, live, term, reset)
	for _, t := range timeline {
		var results string
		if len(t.results) > 0 {
			results = fmt.Sprintf("; results of up to %d of %d candidate jobs reported while it is down", r.cfg.OutageResults, len(t.results))
		}
		fmt.Fprintf(r.out, "plan: at +%.3fs %s%s\n", t.at.Seconds(), t.kind, results)
	}
	return plans, timeline
}

// outageJobs draws the order in which jobs are picked for a result reported while the dev server
// is down: jobs a rich account pays for, with no other follow-up, whose work fails, hangs or is
// late, so that the result decides what the job costs — but not late on attempt 1, whose result
// the simulated runner reports itself, with another output. While the server is down, the first
// OutageResults of them whose submission has answered (their charge is decided: a result needs
// it) get one; which have answered by then depends on how fast the machine is.
func (r *run) outageJobs(plans []jobPlan, rng *mrand.Rand) []jobs.Job {
	var candidates []jobs.Job
	for _, p := range plans {
		sc, _ := activities.ParseScenario(p.job.InputRef)
		matters := sc.Kind == activities.ScenarioHang || sc.Kind == activities.ScenarioFail ||
			(sc.Kind == activities.ScenarioLate && sc.Attempt > 1)
		if matters && !p.hasFollowUp() && p.job.AccountID != r.accounts[richAccounts] {
			candidates = append(candidates, p.job)
		}
	}
	rng.Shuffle(len(candidates), func(a, b int) { candidates[a], candidates[b] = candidates[b], candidates[a] })
	return candidates
}

// hasFollowUp reports whether the plan has any follow-up.
func (p jobPlan) hasFollowUp() bool {
	return p.duplicate || p.deleteAfter || p.resubmitLive || p.terminate || p.reset
}

// clearFollowUps takes every follow-up off the plan.
func (p *jobPlan) clearFollowUps() {
	p.duplicate, p.deleteAfter, p.resubmitLive, p.terminate, p.reset = false, false, false, false, false
}

// longRunning is the first job from index from on (wrapping around) that a rich account pays for
// and whose work runs for seconds — hanging, or late on its last attempt — and that is not in
// taken; from itself when there is none.
func (r *run) longRunning(plans []jobPlan, from int, taken map[int]bool) int {
	for k := range plans {
		i := (from + k) % len(plans)
		sc, _ := activities.ParseScenario(plans[i].job.InputRef)
		long := sc.Kind == activities.ScenarioHang || (sc.Kind == activities.ScenarioLate && sc.Attempt == 3)
		if !taken[i] && plans[i].job.AccountID != r.accounts[richAccounts] && long {
			return i
		}
	}
	return from
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// openAccounts sets the run's price list and opens its accounts: the rich ones can pay for every
// job twice over, the poor one for about three, so that the mix includes refusals.
func (r *run) openAccounts(ctx context.Context) error {
	prices := []ledgerdb.Price{{Kind: meteredKind, Unit: ledgerdb.UnitGPUSecond, UnitPrice: meteredPrice, MaxUnits: meteredMax, Memo: "chaos run"}}
	for cost := int64(1); cost <= maxCost; cost++ {
		prices = append(prices, ledgerdb.Price{Kind: fixedKind(cost), Unit: ledgerdb.UnitJob, UnitPrice: cost, MaxUnits: 1, Memo: "chaos run"})
	}
	for _, p := range prices {
		if _, _, err := r.ledger.SetPrice(ctx, p); err != nil {
			return err
		}
	}
	for i, id := range r.accounts {
		if _, err := r.ledger.OpenAccount(ctx, id); err != nil {
			return err
		}
		credits := int64(2 * maxCost * r.cfg.Jobs)
		if i == richAccounts {
			credits = 3 * maxCost
		}
		if _, err := r.ledger.Grant(ctx, ledgerdb.Credit{AccountID: id, Amount: credits, Key: "chaos-initial"}); err != nil {
			return err
		}
	}
	return nil
}

// final reports errors that are answers, not outages: retrying them would change nothing. A result
// reported for a job that was never charged (ErrNotStarted) is one: retried, it would be retried
// until the retry deadline, minutes, while the run waits on it.
func final(err error) bool {
	for _, e := range []error{ledgerdb.ErrGone, ledgerdb.ErrConflict, ledgerdb.ErrInsufficientCredits,
		ledgerdb.ErrJobActive, ledgerdb.ErrJobNotFound, ledgerdb.ErrInvalidInput, ledgerdb.ErrUnknownAccount,
		ledgerdb.ErrNotStarted, ledgerdb.ErrRejected} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// retry calls f until it succeeds or answers a final error, for up to three minutes: while
// Temporal or Postgres restarts, calls fail and must be repeated, with the same job ID, exactly as
// a real client would.
func (r *run) retry(ctx context.Context, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(3 * time.Minute)
	backoff := 200 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f(cctx)
		cancel()
		if err == nil || final(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		r.transient.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 3*time.Second)
	}
}

// submitAll submits the jobs at the planned pace and starts each job's follow-ups.
func (r *run) submitAll(ctx context.Context, plans []jobPlan, followUps *sync.WaitGroup) {
	sem := make(chan struct{}, r.cfg.Concurrency)
	var submits sync.WaitGroup
	begin := time.Now()
	for i := range plans {
		p := plans[i]
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(begin.Add(p.submitAtOffset))):
		}
		sem <- struct{}{}
		submits.Go(func() {
			defer func() { <-sem }()
			err := r.retry(ctx, func(ctx context.Context) error {
				_, err := r.st.Submit(ctx, p.job)
				return err
			})
			if err != nil && !errors.Is(err, ledgerdb.ErrInsufficientCredits) {
				r.anomaly("submitting %s failed: %v", p.job.ID, err)
				return
			}
			r.mu.Lock()
			r.submitted[p.job.ID] = true
			r.mu.Unlock()
			followUps.Go(func() { r.followUp(ctx, p) })
		})
	}
	submits.Wait()
}

// terminal are the states a job leaves only by a late result (refunded) or a delete.
var terminal = []ledgerdb.State{ledgerdb.StateRejected, ledgerdb.StateDelivered, ledgerdb.StateRefunded,
	ledgerdb.StateRecovered, ledgerdb.StateDeleted}

// followUp plays the job's planned duplicate result, delete-and-resubmit or live resubmission.
func (r *run) followUp(ctx context.Context, p jobPlan) {
	switch {
	case p.resubmitLive:
		var sub jobs.Submission
		err := r.retry(ctx, func(ctx context.Context) error {
			var err error
			sub, err = r.st.Submit(ctx, p.job)
			return err
		})
		if (err != nil && !errors.Is(err, ledgerdb.ErrInsufficientCredits)) || !sub.Duplicate || sub.Status.JobID != p.job.ID {
			r.anomaly("resubmitting live %s: want the original job (duplicate), got duplicate=%v job=%q err=%v", p.job.ID, sub.Duplicate, sub.Status.JobID, err)
			return
		}
		r.event(KindResubmitLive, "%s answered the original job (%s)", p.job.ID, sub.Status.State)
	case p.duplicate:
		sleep(ctx, p.followUpDelay)
		res := resultOf(p.job)
		paths := make([]string, 2)
		var both sync.WaitGroup
		for k := range 2 {
			both.Go(func() {
				err := r.retry(ctx, func(ctx context.Context) error {
					rep, err := r.st.ReportResult(ctx, p.job.Key(), res)
					paths[k] = rep.Path
					return err
				})
				switch {
				case errors.Is(err, ledgerdb.ErrNotStarted):
					// The right answer for a job that was never charged (rejected): it has no work
					// whose result could be taken. Wrong for any other.
					paths[k] = "not_started"
					if job, jerr := r.ledger.Job(ctx, p.job.Key()); jerr == nil && job.IsCharged {
						r.anomaly("a result for charged job %s (%s) was refused as never charged: %v", p.job.ID, job.State, err)
					}
				case err != nil:
					paths[k] = "error: " + err.Error()
				}
			})
		}
		both.Wait()
		r.event(KindDuplicateResult, "%s (%s) result reported twice: %s, %s", p.job.ID, p.job.InputRef, paths[0], paths[1])
	case p.terminate:
		sleep(ctx, p.followUpDelay/4)
		r.terminate(ctx, p)
	case p.reset:
		sleep(ctx, p.followUpDelay/4)
		r.reset(ctx, p)
	case p.deleteAfter:
		state, err := r.waitSettled(ctx, p.job.Key())
		if err != nil {
			r.anomaly("%s never settled before its delete: %v", p.job.ID, err)
			return
		}
		if err := r.retry(ctx, func(ctx context.Context) error { _, err := r.st.Delete(ctx, p.job.Key()); return err }); err != nil {
			r.anomaly("deleting settled %s (%s): %v", p.job.ID, state, err)
			return
		}
		err = r.retry(ctx, func(ctx context.Context) error { _, err := r.st.Submit(ctx, p.job); return err })
		if !errors.Is(err, ledgerdb.ErrGone) {
			r.anomaly("resubmitting deleted %s: want ErrGone, got %v", p.job.ID, err)
			return
		}
		r.event(KindDeleteResubmit, "%s deleted when %s; resubmission answered ErrGone", p.job.ID, state)
	}
}

// resultOf is the result the driver reports for job, as its GPU service would: attempt 1's, with
// no usage (billed the whole hold).
func resultOf(job jobs.Job) activities.WorkResult {
	return activities.WorkResult{Attempt: 1, OutputRef: "chaos://" + job.ID, FinishedAt: time.Now()}
}

// waitSettled waits, for up to QuiesceTimeout, until the job is in one of the terminal states and
// answers that state. With reads on it waits as a user polling the job does, through the job
// service's status read (which heals on read); with reads off it polls the ledger itself, so that
// only the scheduled pass heals.
func (r *run) waitSettled(ctx context.Context, key ledgerdb.JobKey) (ledgerdb.State, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.QuiesceTimeout)
	defer cancel()
	var state ledgerdb.State
	// Each try waits on ctx, not on the retry's per-call deadline: settling may take minutes.
	err := r.retry(ctx, func(context.Context) error {
		if r.cfg.Reads {
			st, err := r.st.Wait(ctx, key, terminal...)
			state = st.State
			return err
		}
		for {
			job, err := r.ledger.Job(ctx, key)
			if err != nil {
				return err
			}
			if state = job.State; slices.Contains(terminal, state) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("job %s still %s: %w", key, state, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return state, err
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// inject fires the run-wide injections at their planned offsets.
func (r *run) inject(ctx context.Context, timeline []timedInjection) {
	begin := time.Now()
	for _, t := range timeline {
		sleep(ctx, time.Until(begin.Add(t.at)))
		if ctx.Err() != nil {
			return
		}
		switch t.kind {
		case KindKillWorker:
			w := r.procs[t.worker]
			if pid, ok := w.kill(); ok {
				r.event(KindKillWorker, "worker %d (pid %d) SIGKILLed", w.id, pid)
			} else {
				r.event("skipped", "worker %d was not running; no SIGKILL", w.id)
			}
		case KindRestartTemporal:
			r.event(KindRestartTemporal, "stopping the dev server on %s", r.server.Address())
			began := time.Now()
			r.server.Stop()
			r.reportWhileDown(ctx, t.results)
			if err := r.server.Start(ctx); err != nil {
				r.anomaly("the dev server did not come back: %v", err)
				continue
			}
			r.logf("", "dev server back after %.1fs (pid %d)", time.Since(began).Seconds(), r.server.PID())
		case KindRestartPostgres:
			r.event(KindRestartPostgres, "%s", strings.Join(r.cfg.PostgresRestartCommand, " "))
			began := time.Now()
			outb, err := exec.CommandContext(ctx, r.cfg.PostgresRestartCommand[0], r.cfg.PostgresRestartCommand[1:]...).CombinedOutput()
			if err != nil {
				r.anomaly("restarting Postgres failed: %v: %s", err, strings.TrimSpace(string(outb)))
				continue
			}
			r.logf("", "Postgres back after %.1fs", time.Since(began).Seconds())
		case KindOrphan:
			id := r.orphanKey(t.orphan)
			err := r.retry(ctx, func(ctx context.Context) error {
				_, err := r.ledger.Submit(ctx, ledgerdb.Submission{JobID: id.JobID, AccountID: id.AccountID, Kind: fixedKind(7), Request: []byte("sim:ok")})
				return err
			})
			if err != nil {
				r.anomaly("writing orphan %s: %v", id, err)
				continue
			}
			r.event(KindOrphan, "%s: placeholder written, no workflow started (a submitter crashed)", id)
			r.faults.add("job:"+id.String(), "orphaned placeholder "+id.String(), time.Now().Add(r.cfg.PassGrace), r.leaves(id, ledgerdb.StateSubmitting))
		}
	}
}

// reportWhileDown reports, while the dev server is down, the results of the first OutageResults
// of candidates whose submission has answered, as a GPU service whose call cannot reach Temporal:
// the job service waits for Temporal for outageReportWait, then answers "recorded" — the result is
// in the ledger's inbox, and the scheduled pass must apply it once Temporal is back.
func (r *run) reportWhileDown(ctx context.Context, candidates []jobs.Job) {
	var results []jobs.Job
	r.mu.Lock()
	for _, job := range candidates {
		if r.submitted[job.ID] && len(results) < r.cfg.OutageResults {
			results = append(results, job)
		}
	}
	r.mu.Unlock()
	var all sync.WaitGroup
	for _, job := range results {
		all.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, outageReportWait)
			rep, err := r.st.ReportResult(rctx, job.Key(), resultOf(job))
			cancel()
			switch {
			case err != nil:
				r.anomaly("reporting %s's result while Temporal was down: %v", job.ID, err)
			case rep.Path != jobs.PathRecorded:
				r.anomaly("reporting %s's result while Temporal was down answered %s, not %s", job.ID, rep.Path, jobs.PathRecorded)
			default:
				r.mu.Lock()
				r.recorded = append(r.recorded, job.Key())
				r.mu.Unlock()
				r.event(KindRecordedResult, "%s (%s) result reported while Temporal was down: %s (the ledger says %s)", job.ID, job.InputRef, rep.Path, rep.Status.State)
				key := job.Key()
				r.faults.add("result:"+key.String(), "result recorded for "+key.String(), time.Now().Add(r.cfg.PassResultGrace), r.resultApplied(key))
			}
		})
	}
	all.Wait()
}

// outageReportWait is how long a report made while the dev server is down waits for Temporal
// before it answers "recorded".
const outageReportWait = 3 * time.Second

// orphanKey is the i-th orphan placeholder the run writes.
func (r *run) orphanKey(i int) ledgerdb.JobKey {
	return ledgerdb.JobKey{AccountID: r.accounts[i%richAccounts], JobID: fmt.Sprintf("%sorphan-%d", r.prefix, i)}
}

// terminate is the Temporal UI's Terminate button (TerminateWorkflow) pressed on the job's
// workflow while it runs. The job is then charged with no run to settle it until the reconcile
// pass or a read of its status heals it: refunded, or delivered or recovered if its result lands.
// A workflow that has closed already cannot be terminated; that is logged as skipped.
func (r *run) terminate(ctx context.Context, p jobPlan) {
	workflowID := workflows.JobWorkflowID(p.job.AccountID, p.job.ID)
	closed := false
	err := r.retry(ctx, func(ctx context.Context) error {
		err := r.tc.TerminateWorkflow(ctx, workflowID, "", "chaos: an operator pressed Terminate")
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			closed = true
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		r.anomaly("terminating %s: %v", p.job.ID, err)
	case closed:
		r.event("skipped", "%s (%s): its workflow had closed; nothing to terminate", p.job.ID, p.job.InputRef)
	default:
		state := "unknown"
		if job, err := r.ledger.Job(ctx, p.job.Key()); err == nil {
			state = string(job.State)
		}
		r.mu.Lock()
		r.terminated = append(r.terminated, p.job.Key())
		r.mu.Unlock()
		r.event(KindTerminate, "%s (%s) terminated while its workflow ran (the ledger says %s)", p.job.ID, p.job.InputRef, state)
		r.faults.add("job:"+p.job.Key().String(), "terminated job "+p.job.Key().String(), time.Now(), r.leaves(p.job.Key(), ledgerdb.StateRunning))
		if r.cfg.Reads {
			// A user polling the job: its first status read heals it.
			if _, err := r.waitSettled(ctx, p.job.Key()); err != nil {
				r.anomaly("terminated %s never settled while its status was read: %v", p.job.ID, err)
			}
		}
	}
}

// reset is an operator's reset of the job's running workflow to its first workflow task
// (ResetWorkflowExecution, as `temporal workflow reset --type FirstWorkflowTask` and the UI do):
// the new run starts the job over, its charge step included, which the ledger's guard must answer
// without a second charge. One request ID serves the retries of one reset, so a retried call is the
// same reset. A workflow that has closed is left alone and logged as skipped.
func (r *run) reset(ctx context.Context, p jobPlan) {
	workflowID := workflows.JobWorkflowID(p.job.AccountID, p.job.ID)
	requestID := newRequestID()
	var (
		runID   string
		skipped string
	)
	err := r.retry(ctx, func(ctx context.Context) error {
		skipped = ""
		desc, err := r.tc.DescribeWorkflow(ctx, workflowID, "")
		if err != nil {
			return err
		}
		info := desc.RawResponse.GetWorkflowExecutionInfo()
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			skipped = "its workflow had closed (" + info.GetStatus().String() + "); nothing to reset"
			return nil
		}
		runID = info.GetExecution().GetRunId()
		first, err := r.firstWorkflowTask(ctx, workflowID, runID)
		if err != nil {
			return err
		}
		if first == 0 {
			skipped = "its workflow has not completed a workflow task yet; nothing to reset to"
			return nil
		}
		_, err = r.tc.WorkflowService().ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
			Namespace:                 r.namespace,
			WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID},
			Reason:                    "chaos: an operator reset the job to its first workflow task",
			WorkflowTaskFinishEventId: first,
			RequestId:                 requestID,
		})
		return err
	})
	switch {
	case err != nil:
		r.anomaly("resetting %s: %v", p.job.ID, err)
	case skipped != "":
		r.event("skipped", "%s (%s): %s", p.job.ID, p.job.InputRef, skipped)
	default:
		r.event(KindReset, "%s (%s) reset to its first workflow task (run %s)", p.job.ID, p.job.InputRef, runID)
	}
}

// firstWorkflowTask is the event ID of the run's first WorkflowTaskCompleted, the point
// `--type FirstWorkflowTask` resets to; 0 when the run has not completed one.
func (r *run) firstWorkflowTask(ctx context.Context, workflowID, runID string) (int64, error) {
	iter := r.tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		event, err := iter.Next()
		if err != nil {
			return 0, err
		}
		if event.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return event.GetEventId(), nil
		}
	}
	return 0, nil
}

// newRequestID is a random version-4 UUID, the form Temporal's request IDs take.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// writeSummary prints the report's figures.
func writeSummary(out io.Writer, r Report) {
	kinds := make([]string, 0, len(r.Injections))
	for k := range r.Injections {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(out, "\nchaos summary: seed %d, prefix %s, %d jobs + %d orphans, %s\n", r.Seed, r.Prefix, r.Jobs, r.Orphans, r.Elapsed.Round(time.Second))
	for _, k := range kinds {
		fmt.Fprintf(out, "  injected %-17s %d\n", k, r.Injections[k])
	}
	states := make([]string, 0, len(r.States))
	for s, n := range r.States {
		states = append(states, fmt.Sprintf("%s %d", s, n))
	}
	sort.Strings(states)
	fmt.Fprintf(out, "  final states: %s\n", strings.Join(states, ", "))
	fmt.Fprintf(out, "  orphans healed: %d of %d; transient errors retried: %d\n", r.OrphansHealed, r.Orphans, r.TransientErrors)
	terminated, settled := 0, 0
	for state, n := range r.Terminated {
		terminated += n
		if state == ledgerdb.StateRefunded || state == ledgerdb.StateRecovered || state == ledgerdb.StateDelivered {
			settled += n
		}
	}
	fmt.Fprintf(out, "  terminated jobs: %d (refunded %d, recovered %d, delivered %d); left running: %d; not settled: %d\n",
		terminated, r.Terminated[ledgerdb.StateRefunded], r.Terminated[ledgerdb.StateRecovered], r.Terminated[ledgerdb.StateDelivered],
		r.Terminated[ledgerdb.StateRunning], terminated-settled)
	recorded := 0
	for _, n := range r.Recorded {
		recorded += n
	}
	fmt.Fprintf(out, "  results recorded while Temporal was down: %d (recovered %d, delivered %d); not billed: %d\n",
		recorded, r.Recorded[ledgerdb.StateRecovered], r.Recorded[ledgerdb.StateDelivered],
		recorded-r.Recorded[ledgerdb.StateRecovered]-r.Recorded[ledgerdb.StateDelivered])
	healer := "the workers' scheduled pass alone (reads off)"
	if r.Reads {
		healer = "the workers' scheduled pass and the driver's status reads (reads on)"
	}
	fmt.Fprintf(out, "  healed by %s: %d faults repaired, none outlasting more than %d completed passes (bound %d)\n",
		healer, r.Repaired, r.MostPassesOutlasted, HealPasses-1)
	fmt.Fprintf(out, "  scheduled passes: %d completed, %d ended otherwise; results applied %d, jobs healed %d, placeholders started %d, orphans rejected %d\n",
		r.Passes.Completed, r.Passes.Ended, r.Passes.ResultsApplied, r.Passes.Healed, r.Passes.Started, r.Passes.OrphansRejected)
	for _, a := range r.Anomalies {
		fmt.Fprintf(out, "  anomaly: %s\n", a)
	}
	fmt.Fprintf(out, "  violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(out, "    %s: %s\n", v.Kind, v.Message)
	}
}
