// Package ledgerbench measures the ledger's job lifecycle (charge, refund, duplicate refund,
// reclaim) through the ledgerdb Go API against the same lifecycle written as the leanest raw SQL,
// driven by pgbench, on the same database in the same run.
//
// Both sides do one round trip per transition: the Go API calls one schema function per
// operation (pgx prepares each statement once per connection, then sends Bind/Execute/Sync), and
// the raw script (lifecycle.sql) is one autocommit statement per transition under pgbench -M
// prepared. What differs is the server's work behind each round trip; docs/benchmarks.md has
// the figures and what the gap was traced to.
//
// A run never deletes anything (the schema refuses it): it names its accounts and jobs with a
// fresh prefix, so runs accumulate side by side, and it verifies the money of both sides before
// it reports a figure.
package ledgerbench

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/ledgerdb"
)

// lifecycleScript is the raw-SQL side: one lifecycle per pgbench transaction.
//
//go:embed lifecycle.sql
var lifecycleScript []byte

// TransitionsPerLifecycle is how many ledger operations one lifecycle makes: charge, refund,
// duplicate refund and reclaim.
const TransitionsPerLifecycle = 4

// rowsPerLifecycle is how many ledger rows one lifecycle writes: the duplicate refund writes none.
const rowsPerLifecycle = 3

// jobCost is every benchmark job's price in credits.
const jobCost = 40

// grantPerAccount is each account's opening grant: far more than any run can spend, so no charge
// is ever refused and both sides always walk the full lifecycle.
const grantPerAccount = 1_000_000_000_000

// Config says what one benchmark run does. Zero fields take the defaults noted on them.
type Config struct {
	// DatabaseURL is the Postgres database to benchmark (migrated by Run if it is not yet), as
	// its owner: the set-up (bulk inserts and COPY) and the raw-SQL side write the tables
	// directly, which the application role may not. Both sides run as this role, so the
	// comparison stays like for like.
	DatabaseURL string
	// Clients is how many concurrent clients each side runs: pgbench -c, and goroutines (with a
	// pool of as many connections) on the Go side. Default 16.
	Clients int
	// Lifecycles is how many job lifecycles each client runs per round on each side. Default
	// DefaultLifecycles.
	Lifecycles int
	// Accounts is how many fresh accounts each side spreads its jobs over. Default 1,000.
	Accounts int
	// Rounds is how many times each side runs, alternating raw, Go, raw, Go, ... so that a drift
	// of the machine during the run does not favour one side; the medians are reported. Default 2.
	Rounds int
	// PgbenchPath is the pgbench binary. Default "pgbench", found on PATH.
	PgbenchPath string
	// PgbenchThreads is pgbench -j, capped at Clients. Default 2 (the machine's cores).
	PgbenchThreads int
}

// DefaultLifecycles is Config.Lifecycles when left zero: on the reference machine (2 cores,
// PostgreSQL 15, fsync on) it keeps each side busy for more than 20 seconds per round.
const DefaultLifecycles = 2500

func (c Config) withDefaults() Config {
	if c.Clients == 0 {
		c.Clients = 16
	}
	if c.Lifecycles == 0 {
		c.Lifecycles = DefaultLifecycles
	}
	if c.Accounts == 0 {
		c.Accounts = 1000
	}
	if c.Rounds == 0 {
		c.Rounds = 2
	}
	if c.PgbenchPath == "" {
		c.PgbenchPath = "pgbench"
	}
	if c.PgbenchThreads == 0 {
		c.PgbenchThreads = 2
	}
	c.PgbenchThreads = min(c.PgbenchThreads, c.Clients)
	return c
}

func (c Config) validate() error {
	switch {
	case c.DatabaseURL == "":
		return errors.New("ledgerbench: no database URL")
	case c.Clients < 1, c.Lifecycles < 1, c.Accounts < 1, c.Rounds < 1, c.PgbenchThreads < 1:
		return fmt.Errorf("ledgerbench: clients (%d), lifecycles (%d), accounts (%d), rounds (%d) and pgbench threads (%d) must all be at least 1",
			c.Clients, c.Lifecycles, c.Accounts, c.Rounds, c.PgbenchThreads)
	}
	return nil
}

// Figures are one side's throughput and latency, for one round or as the median of the rounds.
type Figures struct {
	// Lifecycles is how many job lifecycles the side completed (clients × lifecycles per client).
	Lifecycles int
	// Elapsed is the wall time of the round, connections excluded (pgbench's own measure on the
	// raw side). Zero for medians.
	Elapsed time.Duration
	// LifecyclesPerSec is completed lifecycles per second.
	LifecyclesPerSec float64
	// TransitionsPerSec is LifecyclesPerSec × TransitionsPerLifecycle.
	TransitionsPerSec float64
	// MeanLatency is the mean time of one whole lifecycle (four round trips) as a client saw it.
	MeanLatency time.Duration
	// RoundTripsPerLifecycle is how many round trips one lifecycle took: counted by a pgx tracer
	// on the Go side (statement preparations included); TransitionsPerLifecycle by construction
	// on the raw side, where pgbench -M prepared sends each statement of the script as one
	// Bind/Execute/Sync.
	RoundTripsPerLifecycle float64
	// LoadAverage is the machine's 1-minute load average (/proc/loadavg) as the round began, so
	// that a reader can tell a quiet machine from a shared one; 0 when unknown or for medians.
	LoadAverage float64
}

// Verification is what Run checked after the last round; Run fails instead of returning a Result
// when any check does not hold.
type Verification struct {
	// Jobs is how many benchmark jobs (both sides, every round) were found recovered, each with
	// exactly one charge, one refund and one reclaim row that net to minus its cost.
	Jobs int
	// LedgerRows is how many ledger rows those jobs have: rowsPerLifecycle (3) per lifecycle.
	LedgerRows int
	// Accounts is how many accounts were checked: each balance equals the sum of its rows, equals
	// its grant less the cost of its jobs, and its ledger passes ledgerdb's Audit.
	Accounts int
}

// Result is the outcome of one Run.
type Result struct {
	// Prefix starts the ID of every account and job the run created.
	Prefix string
	// Config is the configuration the run used, defaults filled in.
	Config Config
	// RawRounds and GoRounds are each round's figures, in the order they ran.
	RawRounds, GoRounds []Figures
	// Raw and Go are the medians of the rounds.
	Raw, Go Figures
	// Ratio is Go.LifecyclesPerSec / Raw.LifecyclesPerSec: 1.0 means the Go API keeps up with
	// the raw SQL.
	Ratio float64
	// Verified is what the correctness checks found.
	Verified Verification
}

// Run prepares fresh accounts and jobs, runs the raw-SQL side under pgbench and the Go side
// through ledgerdb alternately for cfg.Rounds rounds each, verifies the money of both, and prints
// the figures to out as it goes.
func Run(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	pgbench, err := exec.LookPath(cfg.PgbenchPath)
	if err != nil {
		return Result{}, fmt.Errorf("ledgerbench: pgbench %q not found (it ships with the PostgreSQL client tools): %w", cfg.PgbenchPath, err)
	}
	if err := ledgerdb.Migrate(ctx, cfg.DatabaseURL); err != nil {
		return Result{}, fmt.Errorf("ledgerbench: %w", err)
	}

	// The Go side gets exactly one connection per client, as pgbench does.
	poolCfg, err := ledgerdb.PoolConfig(cfg.DatabaseURL)
	if err != nil {
		return Result{}, fmt.Errorf("ledgerbench: %w", err)
	}
	poolCfg.MaxConns = int32(cfg.Clients)
	tracer := &roundTrips{}
	poolCfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return Result{}, fmt.Errorf("ledgerbench: %w", err)
	}
	defer pool.Close()
	store := ledgerdb.New(pool)

	script, err := writeScript()
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(filepath.Dir(script))

	b := &bench{cfg: cfg, pool: pool, store: store, tracer: tracer, pgbench: pgbench, script: script, out: out, prefix: newPrefix()}
	res := Result{Prefix: b.prefix, Config: cfg}
	fmt.Fprintf(out, "ledger lifecycle benchmark: prefix %s, %d clients × %d lifecycles per round and side, %d accounts per side, %d rounds, %d transitions per lifecycle\n",
		b.prefix, cfg.Clients, cfg.Lifecycles, cfg.Accounts, cfg.Rounds, TransitionsPerLifecycle)

	start := time.Now()
	if err := b.prepare(ctx); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "prepared %d accounts and %d jobs in %s\n",
		2*cfg.Accounts, 2*cfg.Rounds*cfg.Clients*cfg.Lifecycles, time.Since(start).Round(time.Millisecond))

	for round := 1; round <= cfg.Rounds; round++ {
		raw, err := b.runRaw(ctx, round)
		if err != nil {
			return res, err
		}
		res.RawRounds = append(res.RawRounds, raw)
		fmt.Fprintf(out, "round %d  raw SQL (pgbench)  %s\n", round, raw)

		goSide, err := b.runGo(ctx, round)
		if err != nil {
			return res, err
		}
		res.GoRounds = append(res.GoRounds, goSide)
		fmt.Fprintf(out, "round %d  Go API (ledgerdb)  %s\n", round, goSide)
	}

	if res.Verified, err = b.verify(ctx); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "verified: %d jobs recovered, %d ledger rows (%d per lifecycle), %d accounts with balance = sum of rows = grant - cost of jobs, audit clean\n",
		res.Verified.Jobs, res.Verified.LedgerRows, rowsPerLifecycle, res.Verified.Accounts)

	res.Raw, res.Go = median(res.RawRounds), median(res.GoRounds)
	res.Ratio = res.Go.LifecyclesPerSec / res.Raw.LifecyclesPerSec
	fmt.Fprintf(out, "median   raw SQL (pgbench)  %s\n", res.Raw)
	fmt.Fprintf(out, "median   Go API (ledgerdb)  %s\n", res.Go)
	fmt.Fprintf(out, "ratio Go/raw: %.3f\n", res.Ratio)
	return res, nil
}

// String is one line of figures as Run prints them.
func (f Figures) String() string {
	s := fmt.Sprintf("%8.1f lifecycles/s  %8.1f transitions/s  mean latency %7.3f ms/lifecycle (%.3f ms/transition)  %.2f round trips/lifecycle",
		f.LifecyclesPerSec, f.TransitionsPerSec, ms(f.MeanLatency), ms(f.MeanLatency)/TransitionsPerLifecycle, f.RoundTripsPerLifecycle)
	if f.Elapsed > 0 {
		s += fmt.Sprintf("  [%d lifecycles in %.2f s, load %.2f]", f.Lifecycles, f.Elapsed.Seconds(), f.LoadAverage)
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median takes each figure's median on its own; with an even count it is the mean of the middle
// two.
func median(rounds []Figures) Figures {
	pick := func(get func(Figures) float64) float64 {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = get(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Figures{
		Lifecycles:             rounds[0].Lifecycles,
		LifecyclesPerSec:       pick(func(f Figures) float64 { return f.LifecyclesPerSec }),
		TransitionsPerSec:      pick(func(f Figures) float64 { return f.TransitionsPerSec }),
		MeanLatency:            time.Duration(pick(func(f Figures) float64 { return float64(f.MeanLatency) })),
		RoundTripsPerLifecycle: pick(func(f Figures) float64 { return f.RoundTripsPerLifecycle }),
	}
}

// newPrefix is a fresh run prefix: the time for a human reading the tables, random hex so that
// two runs in the same second still differ.
func newPrefix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "lb" + time.Now().UTC().Format("060102150405") + hex.EncodeToString(b[:])
}

// writeScript puts the embedded script where pgbench can read it.
func writeScript() (string, error) {
	dir, err := os.MkdirTemp("", "ledgerbench-")
	if err != nil {
		return "", fmt.Errorf("ledgerbench: %w", err)
	}
	path := filepath.Join(dir, "lifecycle.sql")
	if err := os.WriteFile(path, lifecycleScript, 0o600); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("ledgerbench: %w", err)
	}
	return path, nil
}

type bench struct {
	cfg     Config
	pool    *pgxpool.Pool
	store   *ledgerdb.Store
	tracer  *roundTrips
	pgbench string
	script  string
	out     io.Writer
	prefix  string
}

// The two sides, as they appear in IDs.
const (
	sideRaw = "r"
	sideGo  = "g"
)

// accountID is account i (0-based) of a side.
func (b *bench) accountID(side string, i int) string {
	return fmt.Sprintf("%s-%sa-%d", b.prefix, side, i)
}

// runPrefix starts the IDs of one side's jobs in one round; pgbench gets it as -D run=....
func (b *bench) runPrefix(side string, round int) string {
	return fmt.Sprintf("%s-%s%d", b.prefix, side, round)
}

// jobID is the job of a client's nth lifecycle (1-based, as the script's counter) in a round.
// lifecycle.sql builds the same ID as run || '-' || client_id || '-' || n.
func (b *bench) jobID(side string, round, client, n int) string {
	return fmt.Sprintf("%s-%d-%d", b.runPrefix(side, round), client, n)
}

// prepare opens each side's accounts with a grant and writes every round's placeholder jobs, in
// bulk and before any timing, so that neither side pays for set-up. The rows are what the API
// would write (a grant row with its balance_after; a submitting job with its fingerprint).
func (b *bench) prepare(ctx context.Context) error {
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, side := range []string{sideRaw, sideGo} {
			ids := make([]string, b.cfg.Accounts)
			for i := range ids {
				ids[i] = b.accountID(side, i)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO accounts (id, balance) SELECT unnest($1::text[]), $2`, ids, grantPerAccount); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `
				INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, memo)
				SELECT unnest($1::text[]), 'grant', $2, $2, 'ledgerbench', 'ledgerbench opening grant'`, ids, grantPerAccount); err != nil {
				return err
			}
		}

		var rows [][]any
		for round := 1; round <= b.cfg.Rounds; round++ {
			// The same seed for both sides of a round gives them the same job-to-account spread,
			// hence the same contention on account rows. The spread is random, not i % accounts,
			// which would march every client over the same accounts in step.
			for _, side := range []string{sideRaw, sideGo} {
				rng := mathrand.New(mathrand.NewPCG(uint64(round), 0x1edb))
				for client := range b.cfg.Clients {
					for n := 1; n <= b.cfg.Lifecycles; n++ {
						sub := ledgerdb.Submission{
							JobID:     b.jobID(side, round, client, n),
							AccountID: b.accountID(side, rng.IntN(b.cfg.Accounts)),
							Cost:      jobCost,
						}
						rows = append(rows, []any{sub.JobID, sub.AccountID, sub.Cost, sub.Fingerprint()})
					}
				}
			}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"}, []string{"id", "account_id", "cost", "request_fingerprint"},
			pgx.CopyFromRows(rows))
		return err
	})
	if err != nil {
		return fmt.Errorf("ledgerbench: preparing accounts and jobs: %w", err)
	}
	// Fresh statistics, so that both sides are planned on the tables as they now are.
	if _, err := b.pool.Exec(ctx, `ANALYZE accounts, jobs, ledger_entries`); err != nil {
		return fmt.Errorf("ledgerbench: analyzing: %w", err)
	}
	return nil
}

var (
	pgbenchProcessed = regexp.MustCompile(`number of transactions actually processed: (\d+)/(\d+)`)
	pgbenchFailed    = regexp.MustCompile(`number of failed transactions: (\d+)`)
	pgbenchLatency   = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
	pgbenchTPS       = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
)

// runRaw runs one round of the raw-SQL side under pgbench.
func (b *bench) runRaw(ctx context.Context, round int) (Figures, error) {
	// -M prepared: each client parses each statement once, as pgx's statement cache does on the
	// Go side. -n: there are no pgbench tables to vacuum. n=0 seeds each client's counter.
	args := []string{"-n", "-M", "prepared",
		"-c", strconv.Itoa(b.cfg.Clients), "-j", strconv.Itoa(b.cfg.PgbenchThreads), "-t", strconv.Itoa(b.cfg.Lifecycles),
		"-D", "run=" + b.runPrefix(sideRaw, round), "-D", "n=0", "-f", b.script, b.cfg.DatabaseURL}
	load := loadAverage()
	cmd := exec.CommandContext(ctx, b.pgbench, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	report := stdout.String() + stderr.String()
	// The URL may hold a password; the printed command leaves it out.
	shown := strings.Join(append([]string{"pgbench"}, args[:len(args)-1]...), " ") + " <database URL>"
	if runErr != nil {
		return Figures{}, fmt.Errorf("ledgerbench: %s: %w\n%s", shown, runErr, report)
	}

	expected := b.cfg.Clients * b.cfg.Lifecycles
	m := pgbenchProcessed.FindStringSubmatch(report)
	if m == nil || m[1] != strconv.Itoa(expected) || m[2] != strconv.Itoa(expected) {
		return Figures{}, fmt.Errorf("ledgerbench: pgbench did not process all %d lifecycles:\n%s", expected, report)
	}
	if f := pgbenchFailed.FindStringSubmatch(report); f == nil || f[1] != "0" {
		return Figures{}, fmt.Errorf("ledgerbench: pgbench reported failed lifecycles:\n%s", report)
	}
	lat, tps := pgbenchLatency.FindStringSubmatch(report), pgbenchTPS.FindStringSubmatch(report)
	if lat == nil || tps == nil {
		return Figures{}, fmt.Errorf("ledgerbench: cannot read pgbench's latency and tps:\n%s", report)
	}
	latency, err1 := strconv.ParseFloat(lat[1], 64)
	rate, err2 := strconv.ParseFloat(tps[1], 64)
	if err := errors.Join(err1, err2); err != nil || rate <= 0 {
		return Figures{}, fmt.Errorf("ledgerbench: reading pgbench's figures: %v\n%s", err, report)
	}
	if round == 1 {
		fmt.Fprintf(b.out, "raw side command: %s\n", shown)
	}
	return Figures{
		Lifecycles:             expected,
		Elapsed:                time.Duration(float64(expected) / rate * float64(time.Second)),
		LifecyclesPerSec:       rate,
		TransitionsPerSec:      rate * TransitionsPerLifecycle,
		MeanLatency:            time.Duration(latency * float64(time.Millisecond)),
		RoundTripsPerLifecycle: TransitionsPerLifecycle,
		LoadAverage:            load,
	}, nil
}

// runGo runs one round of the Go side: one goroutine per client, each walking its own jobs
// through the Store exactly as the workflow would, and checking every outcome.
func (b *bench) runGo(ctx context.Context, round int) (Figures, error) {
	// Connect the whole pool first: pgbench's figure excludes its connection time too.
	conns := make([]*pgxpool.Conn, b.cfg.Clients)
	for i := range conns {
		c, err := b.pool.Acquire(ctx)
		if err != nil {
			for _, c := range conns[:i] {
				c.Release()
			}
			return Figures{}, fmt.Errorf("ledgerbench: connecting: %w", err)
		}
		conns[i] = c
	}
	for _, c := range conns {
		c.Release()
	}

	load := loadAverage()
	b.tracer.reset()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	latencies := make([]time.Duration, b.cfg.Clients)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for client := range b.cfg.Clients {
		wg.Go(func() {
			<-begin
			for n := 1; n <= b.cfg.Lifecycles; n++ {
				t0 := time.Now()
				if err := b.lifecycle(ctx, b.jobID(sideGo, round, client, n)); err != nil {
					cancel(err)
					return
				}
				latencies[client] += time.Since(t0)
			}
		})
	}
	start := time.Now()
	close(begin)
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return Figures{}, fmt.Errorf("ledgerbench: Go side, round %d: %w", round, err)
	}

	total := b.cfg.Clients * b.cfg.Lifecycles
	var sum time.Duration
	for _, l := range latencies {
		sum += l
	}
	rate := float64(total) / elapsed.Seconds()
	return Figures{
		Lifecycles:             total,
		Elapsed:                elapsed,
		LifecyclesPerSec:       rate,
		TransitionsPerSec:      rate * TransitionsPerLifecycle,
		MeanLatency:            sum / time.Duration(total),
		RoundTripsPerLifecycle: float64(b.tracer.count()) / float64(total),
		LoadAverage:            load,
	}, nil
}

// roundTrips counts the statements the Go side sends (pgx's QueryTracer) and the statements it
// prepares (PrepareTracer): each is one round trip, so their sum over a round, divided by the
// lifecycles, shows whether the API really does one round trip per transition.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

func (r *roundTrips) reset()       { r.n.Store(0) }
func (r *roundTrips) count() int64 { return r.n.Load() }

// loadAverage is the 1-minute load average, or 0 where /proc/loadavg does not exist.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0
	}
	load, _ := strconv.ParseFloat(fields[0], 64)
	return load
}

// lifecycle is one job's charge, refund, duplicate refund and reclaim through the API; any
// outcome other than the expected one is an error, so the figure counts only correct work.
func (b *bench) lifecycle(ctx context.Context, jobID string) error {
	expect := func(step string, t ledgerdb.Transition, err error, want ledgerdb.Outcome) error {
		if err != nil {
			return fmt.Errorf("%s %s: %w", step, jobID, err)
		}
		if t.Outcome != want {
			return fmt.Errorf("%s %s: outcome %s, want %s", step, jobID, t.Outcome, want)
		}
		return nil
	}
	t, err := b.store.Charge(ctx, jobID)
	if err := expect("charge", t, err, ledgerdb.Applied); err != nil {
		return err
	}
	t, err = b.store.Refund(ctx, jobID, "bench: work failed", 3)
	if err := expect("refund", t, err, ledgerdb.Applied); err != nil {
		return err
	}
	t, err = b.store.Refund(ctx, jobID, "bench: work failed", 3)
	if err := expect("duplicate refund", t, err, ledgerdb.AlreadyApplied); err != nil {
		return err
	}
	t, err = b.store.Reclaim(ctx, jobID)
	return expect("reclaim", t, err, ledgerdb.Applied)
}

// verify checks the money of both sides after the last round: every job recovered with exactly
// one charge, refund and reclaim row (rule 2), rows netting to minus the job's cost; and every
// account's balance equal to the sum of its rows (rule 6) and to its grant less its jobs' costs,
// with ledgerdb's own Audit clean. A benchmark that computed wrong money would be worthless.
func (b *bench) verify(ctx context.Context) (Verification, error) {
	var v Verification
	wantJobs := b.cfg.Rounds * b.cfg.Clients * b.cfg.Lifecycles
	for _, side := range []string{sideRaw, sideGo} {
		jobPrefix := b.prefix + "-" + side // every round's run prefix is <prefix>-<side><round>
		accountPrefix := b.prefix + "-" + side + "a-"
		var jobs, recovered, rows, charges, refunds, reclaims, badJobs int
		err := b.pool.QueryRow(ctx, `
			WITH j AS (
				SELECT id, cost, state = 'recovered' AND is_charged AND is_refunded AND is_reclaimed AS recovered
				FROM jobs WHERE starts_with(id, $1)
			), e AS (
				SELECT e.job_id, count(*) AS n, sum(e.amount) AS net,
				       count(*) FILTER (WHERE kind = 'charge') AS charges,
				       count(*) FILTER (WHERE kind = 'refund') AS refunds,
				       count(*) FILTER (WHERE kind = 'reclaim') AS reclaims
				FROM ledger_entries e JOIN j ON j.id = e.job_id GROUP BY e.job_id
			)
			SELECT (SELECT count(*) FROM j),
			       (SELECT count(*) FROM j WHERE recovered),
			       coalesce((SELECT sum(n) FROM e), 0),
			       coalesce((SELECT sum(charges) FROM e), 0),
			       coalesce((SELECT sum(refunds) FROM e), 0),
			       coalesce((SELECT sum(reclaims) FROM e), 0),
			       (SELECT count(*) FROM j LEFT JOIN e ON e.job_id = j.id
			        WHERE e.n IS DISTINCT FROM 3 OR e.charges <> 1 OR e.refunds <> 1 OR e.reclaims <> 1
			           OR e.net <> -j.cost)`,
			jobPrefix).Scan(&jobs, &recovered, &rows, &charges, &refunds, &reclaims, &badJobs)
		if err != nil {
			return v, fmt.Errorf("ledgerbench: verifying side %s: %w", side, err)
		}
		if jobs != wantJobs || recovered != wantJobs || rows != rowsPerLifecycle*wantJobs ||
			charges != wantJobs || refunds != wantJobs || reclaims != wantJobs || badJobs != 0 {
			return v, fmt.Errorf("ledgerbench: MONEY CHECK FAILED on side %s: want %d jobs, all recovered, with %d rows (one charge, refund and reclaim each); found %d jobs, %d recovered, %d rows (%d charges, %d refunds, %d reclaims), %d jobs whose rows are wrong",
				side, wantJobs, rowsPerLifecycle*wantJobs, jobs, recovered, rows, charges, refunds, reclaims, badJobs)
		}
		v.Jobs += jobs
		v.LedgerRows += rows

		// Rule 6 for every account of the side, and the balance the jobs say it should have.
		accounts, err := b.pool.Query(ctx, `
			SELECT a.id, a.balance,
			       (SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e WHERE e.account_id = a.id),
			       $2::bigint - $3::bigint * (SELECT count(*) FROM jobs j WHERE j.account_id = a.id)
			FROM accounts a WHERE starts_with(a.id, $1)`,
			accountPrefix, grantPerAccount, jobCost)
		if err != nil {
			return v, fmt.Errorf("ledgerbench: verifying side %s: %w", side, err)
		}
		var ids []string
		var bad []string
		for accounts.Next() {
			var id string
			var balance, sum, want int64
			if err := accounts.Scan(&id, &balance, &sum, &want); err != nil {
				accounts.Close()
				return v, fmt.Errorf("ledgerbench: verifying side %s: %w", side, err)
			}
			ids = append(ids, id)
			if balance != sum || balance != want {
				bad = append(bad, fmt.Sprintf("%s: balance %d, sum of rows %d, grant less jobs %d", id, balance, sum, want))
			}
		}
		if err := accounts.Err(); err != nil {
			return v, fmt.Errorf("ledgerbench: verifying side %s: %w", side, err)
		}
		if len(ids) != b.cfg.Accounts || len(bad) > 0 {
			return v, fmt.Errorf("ledgerbench: MONEY CHECK FAILED on side %s: %d of %d accounts found; wrong balances:\n%s",
				side, len(ids), b.cfg.Accounts, strings.Join(bad, "\n"))
		}
		if err := b.audit(ctx, ids); err != nil {
			return v, err
		}
		v.Accounts += len(ids)
	}
	return v, nil
}

// audit runs ledgerdb's Audit (the balance_after chain, rules 2, 3 and 6) on every account,
// Clients at a time.
func (b *bench) audit(ctx context.Context, ids []string) error {
	work := make(chan string)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for range b.cfg.Clients {
		wg.Go(func() {
			for id := range work {
				report, err := b.store.Audit(ctx, id)
				if err == nil && report.OK() {
					continue
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, err.Error())
				} else {
					failures = append(failures, fmt.Sprintf("%s: %v", id, report.Violations))
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if len(failures) > 0 {
		return fmt.Errorf("ledgerbench: MONEY CHECK FAILED: audit of %d accounts:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	return nil
}
