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
// billed, and runs the invariant checker scoped to the run's job-ID prefix and task queue. Its
// accounts hold credit blocks — promotional and paid, of different priorities, some starting and
// some expiring mid-run, which the workers' expiry pass removes — pending grants confirmed or
// failed mid-run, and an automatic top-up rule whose signed webhooks a receiver of the run pays;
// at rest the run checks those too (creditchecks.go). Every choice (scenarios, which jobs get which
// injection, when each injection fires, the credit mix) comes from the seed, so a run can be
// repeated.
package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/internal/devserver"
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
	// ExpiryInterval is the workers' expiry.interval: the schedule they create runs the expiry pass
	// that removes what remains of the blocks that expire mid-run.
	ExpiryInterval time.Duration
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
		ExpiryInterval:         2 * time.Second,
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
	if c.ExpiryInterval <= 0 {
		c.ExpiryInterval = d.ExpiryInterval
	}
	if c.QuiesceTimeout <= 0 {
		c.QuiesceTimeout = d.QuiesceTimeout
	}
	return c
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
	workDir, cleanup, err := runDir(cfg.WorkDir)
	if err != nil {
		return Report{}, err
	}
	defer cleanup()

	r, report := newRun(cfg, out)
	fmt.Fprintf(out, "chaos run: seed %d, %d jobs, prefix %s, task queue %s, work dir %s\n"+
		"reads %s; a scheduled pass every %s (grace %s, result grace %s); an expiry pass every %s\n",
		cfg.Seed, cfg.Jobs, r.prefix, r.taskQueue, workDir, readsLine(cfg.Reads), cfg.PassInterval, cfg.PassGrace, cfg.PassResultGrace, cfg.ExpiryInterval)
	wcfg, err := r.workerConfig()
	if err != nil {
		return report, err
	}
	closeAll, err := r.connect(ctx, tbin, workDir, &wcfg)
	defer closeAll()
	if err != nil {
		return report, err
	}

	plans, timeline := r.plan(&report)
	r.credits = r.planCredits()
	stopReceiver, err := r.serveTopUps()
	defer stopReceiver()
	if err != nil {
		return report, err
	}
	if err := r.openAccounts(ctx); err != nil {
		return report, err
	}
	stopWorkers := r.startWorkers(workerEnv(wcfg, cfg), workDir)
	defer stopWorkers()
	if err := r.drive(ctx, plans, timeline); err != nil {
		return report, err
	}
	if err := r.conclude(ctx, &report); err != nil {
		return report, err
	}
	writeSummary(out, report)
	return report, nil
}

// runDir is the directory the run keeps its dev server's store and the workers' logs in: dir,
// created if missing, or a temporary one that cleanup removes.
func runDir(dir string) (path string, cleanup func(), err error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	if dir, err = os.MkdirTemp("", "jobbill-chaos-"); err != nil {
		return "", nil, err
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

// newRun starts a run's bookkeeping and its report. The prefix and queue must be unique to the run
// (runs share the ledger); the seed alone decides everything else.
func newRun(cfg Config, out io.Writer) (*run, Report) {
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
	return r, report
}

// readsLine says in the run's first lines who heals.
func readsLine(reads bool) string {
	if reads {
		return "on: the driver reads jobs through the job service, which heals on read"
	}
	return "off: only the workers' scheduled pass heals"
}

// workerConfig is the configuration of the run's workers and of its own job service: the run's
// database, task queue, policy and reconcile schedule (the dev server's address comes later).
func (r *run) workerConfig() (config.Config, error) {
	cfg := r.cfg
	wcfg := config.Default()
	wcfg.DatabaseURL = cfg.DatabaseURL
	wcfg.Temporal.TaskQueue = r.taskQueue
	r.namespace = wcfg.Temporal.Namespace
	wcfg.Policy = cfg.Policy
	wcfg.Reconcile = config.Reconcile{Interval: cfg.PassInterval, Grace: cfg.PassGrace, ResultGrace: cfg.PassResultGrace}
	wcfg.Expiry = config.Expiry{Interval: cfg.ExpiryInterval}
	wcfg.Webhooks.Enabled, wcfg.Webhooks.AllowPrivateURLs = true, true
	wcfg.Webhooks.PollInterval, wcfg.Webhooks.Timeout, wcfg.Webhooks.MaxAge = webhookPoll, webhookTimeout, webhookMaxAge
	wcfg.Webhooks.InitialBackoff, wcfg.Webhooks.MaxBackoff = webhookInitialBackoff, webhookMaxBackoff
	if err := wcfg.Validate(); err != nil {
		return wcfg, fmt.Errorf("chaos: the workers' configuration: %w", err)
	}
	return wcfg, nil
}

// connect migrates and opens the ledger, starts the run's own dev server (its address goes into
// wcfg) and connects the driver's client and job service to it. closeAll releases whatever it
// opened, also when it fails half-way.
func (r *run) connect(ctx context.Context, tbin, workDir string, wcfg *config.Config) (closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	cfg := r.cfg
	if cfg.MigrateDatabaseURL != "" {
		if err := ledgerdb.Migrate(ctx, cfg.MigrateDatabaseURL); err != nil {
			return closeAll, fmt.Errorf("chaos: migrating the ledger: %w", err)
		}
	}
	if r.ledger, err = ledgerdb.Open(ctx, cfg.DatabaseURL); err != nil {
		return closeAll, fmt.Errorf("chaos: opening the ledger: %w", err)
	}
	closers = append(closers, r.ledger.Close)
	if err := ownDatabase(ctx, r.ledger); err != nil {
		return closeAll, err
	}

	if r.server, err = devserver.New(tbin, workDir); err != nil {
		return closeAll, err
	}
	if err := r.server.Start(ctx); err != nil {
		return closeAll, err
	}
	closers = append(closers, r.server.Stop)
	fmt.Fprintf(r.out, "temporal dev server on %s (pid %d)\n", r.server.Address(), r.server.PID())

	wcfg.Temporal.Address = r.server.Address()
	if r.tc, err = connect.Dial(ctx, *wcfg, zap.NewNop(), nil); err != nil {
		return closeAll, err
	}
	closers = append(closers, r.tc.Close)
	// The driver's job service carries the same short policy as the workers: the policy travels with
	// each job from its submitter.
	r.st = connect.NewJobs(*wcfg, r.tc, r.ledger, nil)
	return closeAll, nil
}
