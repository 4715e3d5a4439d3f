// Package ledgerbench measures two job lifecycles of the ledger through the ledgerdb Go API
// against the same lifecycles written as the leanest raw SQL, driven by pgbench, on the same
// database in the same run:
//
//   - fixed: a job of a fixed-price kind is charged, refunded, refunded again (a duplicate that
//     writes nothing), and its late result reclaims the refund;
//   - metered: a job of a kind metered by the GPU-second is charged its whole hold, refunded,
//     refunded again, and its late result is settled: the refund reclaimed and the unused part
//     of the hold released, in one call, as the workflow's settle step does.
//
// Both sides do one round trip per transition: the Go API calls one schema function per
// operation (pgx prepares each statement once per connection, then sends Bind/Execute/Sync), and
// the raw scripts (lifecycle.sql, then reclaim.sql or settle.sql) are one autocommit statement
// per transition under pgbench -M prepared. Both write the same durable facts: the ledger rows,
// the jobs' states, and where each row's credits went among the account's credit blocks (the
// block moves, and each block's remaining), the raw statements drawing and giving back in the
// order the ledger functions do (lifecycle.sql says how, in one statement). What differs is the
// server's work behind each round trip; BENCHMARKS.md has the figures and what the gap was
// traced to.
//
// Every account opens as the API would open it, with its opening block, and is funded with one
// paid block (prepare.go); the fixed lifecycle runs once more on accounts funded with several
// blocks, two promotional ones and a paid one, sized so that its charges draw across them
// (fixed+blocks). Each of the two lifecycles runs again on accounts with one webhook endpoint
// each while a delivery worker derives their events from the ledger's rows and delivers them to
// a local receiver, as `jobbill worker` does (hooks.go); the money path writes the same either
// way. Unless told not to, each round also runs the Go side on the pre-outbox ledger
// (preoutbox.go), for the absolute cost of events in the same run. Every Go side reports the 99th
// percentile of one transition too.
//
// A run never deletes anything (the schema refuses it): it names its accounts and jobs with a
// fresh prefix, so runs accumulate side by side, and it verifies the money of both sides, credit
// blocks included, before it reports a figure.
package ledgerbench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/ledgerdb"
)

// The raw-SQL side, one lifecycle per pgbench transaction: the opening both lifecycles share
// (charge, refund, duplicate refund), then each one's last transition. Run joins them into one
// script per lifecycle, writing the draw from credit blocks that the charge and the reclaims
// share (draw.sql) where they say {{draw.sql}}.
var (
	//go:embed lifecycle.sql
	openingScript string
	//go:embed reclaim.sql
	reclaimScript string
	//go:embed settle.sql
	settleScript string
	//go:embed draw.sql
	drawFragment string
)

// TransitionsPerLifecycle is how many ledger operations one lifecycle makes, in both lifecycles:
// charge, refund, duplicate refund, and reclaim (fixed) or settle (metered).
const TransitionsPerLifecycle = 4

// Lifecycle names one of the job lifecycles the benchmark measures.
type Lifecycle string

// The lifecycles, in the order each round runs them.
const (
	// Fixed is a fixed-price job whose result lands after its refund: charge, refund, duplicate
	// refund, reclaim. Three ledger rows; the job ends recovered, charged its price.
	Fixed Lifecycle = "fixed"
	// Metered is a metered job whose result, with its usage, lands after its refund: charge of
	// the whole hold, refund, duplicate refund, settle (reclaim and release in one call). Four
	// ledger rows; the job ends recovered and settled, charged its units used × unit price.
	Metered Lifecycle = "metered"
)

// The benchmark's kinds on the price list. Run sets them with Store.SetPrice, which writes
// nothing when the latest version already says the same, so runs share one version of each.
var (
	fixedPrice = ledgerdb.Price{Kind: "ledgerbench-fixed", Unit: ledgerdb.UnitJob, UnitPrice: 40, MaxUnits: 1,
		Memo: "ledgerbench: the fixed-price lifecycle"}
	// An hour of GPU-seconds at 2 credits: a hold of 7,200 credits, of which the usage (n mod
	// 3,600 for a client's nth lifecycle) leaves a part to release that differs from one of a
	// client's jobs to the next.
	meteredPrice = ledgerdb.Price{Kind: "ledgerbench-metered", Unit: ledgerdb.UnitGPUSecond, UnitPrice: 2, MaxUnits: 3600,
		Memo: "ledgerbench: the metered lifecycle"}
)

// grantPerAccount is what each account is granted at the set-up, in one credit block or several
// (prepare.go): far more than any run can spend, so no charge is ever refused and both sides
// always walk the full lifecycle.
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
	// Lifecycles is how many job lifecycles each client runs per round, side and lifecycle.
	// Default DefaultLifecycles.
	Lifecycles int
	// Accounts is how many fresh accounts each side spreads each lifecycle's jobs over. Default
	// 1,000.
	Accounts int
	// Rounds is how many times each side runs each lifecycle, alternating raw, Go, raw, Go, ... so
	// that a drift of the machine during the run does not favour one side; the medians are
	// reported. Default 2.
	Rounds int
	// PgbenchPath is the pgbench binary. Default "pgbench", found on PATH.
	PgbenchPath string
	// PgbenchThreads is pgbench -j, capped at Clients. Default 2 (the machine's cores).
	PgbenchThreads int
	// SkipPreOutbox leaves out the pre-outbox path (preoutbox.go): the Go side once more, each
	// round, on the ledger without the facts events need. Run by default.
	SkipPreOutbox bool
	// SkipCheckpoints starts each side wherever the database's checkpoint cycle stands, instead
	// of right after a checkpoint (checkpoints.go): for runs that share the database with others.
	SkipCheckpoints bool
	// Only names the lifecycles to run, by their labels (fixed, metered, fixed+blocks,
	// fixed+hooks, metered+hooks); empty runs them all. A shorter run for one question: the
	// lifecycles with endpoints wait for every event's delivery after each round.
	Only []string
}

// DefaultLifecycles is Config.Lifecycles when left zero: on the reference machine (2 cores,
// PostgreSQL 15, fsync on) it keeps each side busy for more than 20 seconds per round and
// lifecycle.
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
	// MeanLatency is the mean time of one whole lifecycle (four transitions) as a client saw it.
	MeanLatency time.Duration
	// RoundTripsPerLifecycle is how many round trips one lifecycle took: counted by a pgx tracer
	// on the Go side (statement preparations included); TransitionsPerLifecycle by construction
	// on the raw side, where pgbench -M prepared sends each statement of the script as one
	// Bind/Execute/Sync.
	RoundTripsPerLifecycle float64
	// LoadAverage is the machine's 1-minute load average (/proc/loadavg) as the round began, so
	// that a reader can tell a quiet machine from a shared one; 0 when unknown or for medians.
	LoadAverage float64
	// P99Lifecycle is the 99th percentile of one lifecycle's time as a client saw it: pgbench's
	// per-transaction log on the raw side (-l), the Go side's own clock (tails.go).
	P99Lifecycle time.Duration
	// P99Transition is the 99th percentile of one ledger call on the Go side; pgbench logs whole
	// scripts only, so it is 0 on the raw side.
	P99Transition time.Duration
	// Drain is, for a lifecycle whose accounts have endpoints, how long after the round ended its
	// last event was derived and delivered; 0 otherwise.
	Drain time.Duration
	// FromCheckpoint says the round began right after a checkpoint (checkpoints.go), and
	// Checkpoints how many more began while it ran. Zero for medians.
	FromCheckpoint bool
	Checkpoints    int64
	// MachineCPU is the CPU the whole machine spent busy during the round, per lifecycle
	// (sides.go); 0 when unknown.
	MachineCPU time.Duration
}

// Verification is what Run checked after the last round; Run fails instead of returning a Result
// when any check does not hold.
type Verification struct {
	// FixedJobs is how many fixed-price jobs (both sides, every round) were found recovered at
	// the benchmark's price, each with exactly a charge, a refund and a reclaim row of its price;
	// FixedRows is how many ledger rows they have (3 per lifecycle).
	FixedJobs, FixedRows int
	// MeteredJobs is how many metered jobs (both sides, every round) were found recovered and
	// settled at the usage reported for them, each with exactly a charge, a refund and a reclaim
	// row of its hold and a release row of (held − used) × unit price; MeteredRows is how many
	// ledger rows they have (4 per lifecycle).
	MeteredJobs, MeteredRows int
	// Accounts is how many accounts were checked: each balance equals the sum of its rows, equals
	// its grant less what its jobs should be charged, and its ledger passes ledgerdb's Audit.
	Accounts int
	// Blocks is how many credit blocks those accounts hold (each one's opening block and a block
	// per grant), every row's moves among them checked against what the ledger functions would
	// have written, and each side's blocks holding as much in all as the other's.
	Blocks int
	// CrossingDraws is how many charges and reclaims of the several-block lifecycle (both sides,
	// every round) drew from more than one block; at least one on each side, or Run fails.
	CrossingDraws int
	// Events is how many webhook events the accounts with endpoints got (both sides, every
	// round): one per charge, refund and reclaim row, each delivered.
	Events int
}

// Comparison is one lifecycle's figures on both sides of a run.
type Comparison struct {
	// Lifecycle is the lifecycle measured.
	Lifecycle Lifecycle
	// Endpoints says whether its accounts had webhook endpoints, with a delivery worker running.
	Endpoints bool
	// Blocks says whether its accounts were funded with several credit blocks (two promotional
	// and a paid one) that its charges drew across, rather than with one.
	Blocks bool
	// RawRounds and GoRounds are each round's figures, in the order they ran.
	RawRounds, GoRounds []Figures
	// Raw and Go are the medians of the rounds.
	Raw, Go Figures
	// Ratio is Go.LifecyclesPerSec / Raw.LifecyclesPerSec: 1.0 means the Go API keeps up with
	// the raw SQL.
	Ratio float64
	// CPURatio is Raw.MachineCPU / Go.MachineCPU, the steadier figure (sides.go): 1.0 means a
	// lifecycle through the Go API costs the machine what the raw SQL's does; 0 when unknown.
	CPURatio float64
	// PreOutboxRounds and PreOutbox are the Go side's figures on the pre-outbox ledger (only for
	// the lifecycles without endpoints, unless Config.SkipPreOutbox), and OverPreOutbox is
	// Go.LifecyclesPerSec / PreOutbox.LifecyclesPerSec: the absolute cost of events.
	PreOutboxRounds []Figures
	PreOutbox       Figures
	OverPreOutbox   float64
}

// Result is the outcome of one Run.
type Result struct {
	// Prefix starts the ID of every account the run created, and the ID (after its account's) of
	// every job.
	Prefix string
	// Config is the configuration the run used, defaults filled in.
	Config Config
	// Fixed and Metered are the two lifecycles' figures on accounts without endpoints, each
	// funded with one credit block; FixedBlocks the fixed lifecycle's on accounts funded with
	// several; FixedHooked and MeteredHooked on accounts with one endpoint each, a delivery worker
	// running.
	Fixed, Metered, FixedBlocks, FixedHooked, MeteredHooked Comparison
	// Verified is what the correctness checks found.
	Verified Verification
	// Conflicts is what the database counted during the rounds (tails.go).
	Conflicts Conflicts
}

// Run sets the benchmark's prices, prepares fresh accounts and jobs, runs each lifecycle's raw-SQL
// side under pgbench and its Go side through ledgerdb alternately for cfg.Rounds rounds, verifies
// the money of both sides, and prints the figures to out as it goes.
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

	dir, err := os.MkdirTemp("", "ledgerbench-")
	if err != nil {
		return Result{}, fmt.Errorf("ledgerbench: %w", err)
	}
	defer os.RemoveAll(dir)

	b := &bench{cfg: cfg, pool: pool, store: store, tracer: tracer, pgbench: pgbench, out: out, prefix: newPrefix(), dir: dir,
		sides: []string{sideRaw, sideGo}}
	res := Result{Prefix: b.prefix, Config: cfg, Fixed: Comparison{Lifecycle: Fixed}, Metered: Comparison{Lifecycle: Metered},
		FixedBlocks: Comparison{Lifecycle: Fixed, Blocks: true},
		FixedHooked: Comparison{Lifecycle: Fixed, Endpoints: true}, MeteredHooked: Comparison{Lifecycle: Metered, Endpoints: true}}
	const fixedSteps, meteredSteps = "charge, refund, duplicate refund, reclaim", "charge, refund, duplicate refund, settle"
	b.lifecycles = []*lifecycle{
		{name: Fixed, tag: "f", steps: fixedSteps, price: fixedPrice, last: reclaimScript, rows: 3, result: &res.Fixed},
		{name: Metered, tag: "m", steps: meteredSteps, price: meteredPrice, last: settleScript, rows: 4, result: &res.Metered},
		{name: Fixed, tag: "fb", steps: fixedSteps, price: fixedPrice, last: reclaimScript, rows: 3, blocks: true, result: &res.FixedBlocks},
		{name: Fixed, tag: "fh", steps: fixedSteps, price: fixedPrice, last: reclaimScript, rows: 3, hooked: true, result: &res.FixedHooked},
		{name: Metered, tag: "mh", steps: meteredSteps, price: meteredPrice, last: settleScript, rows: 4, hooked: true, result: &res.MeteredHooked},
	}
	if b.lifecycles, err = only(b.lifecycles, cfg.Only); err != nil {
		return res, err
	}
	if b.hooks, err = newHooks(pool, b.prefix); err != nil {
		return res, err
	}
	defer b.hooks.close()
	fmt.Fprintf(out, "ledger lifecycle benchmark: prefix %s, %d clients × %d lifecycles per round, side and lifecycle, %d accounts per side and lifecycle, %d rounds, %d transitions per lifecycle\n",
		b.prefix, cfg.Clients, cfg.Lifecycles, cfg.Accounts, cfg.Rounds, TransitionsPerLifecycle)
	// Each account's jobs over the whole run, rounded up: what severalGrants sizes its blocks by.
	jobsPerAccount := (cfg.Rounds*cfg.Clients*cfg.Lifecycles + cfg.Accounts - 1) / cfg.Accounts
	for _, lc := range b.lifecycles {
		lc.base = lc.price
		if err := lc.setUp(ctx, store, dir); err != nil {
			return res, err
		}
		lc.grants = oneGrant()
		if lc.blocks {
			lc.grants = severalGrants(jobsPerAccount, lc.price.Hold())
		}
		endpoints := "no webhook endpoints"
		if lc.hooked {
			endpoints = "an endpoint per account, a delivery worker deriving and delivering"
		}
		fmt.Fprintf(out, "lifecycle %-14s %s; %s; %s\n", lc.label()+":", lc.steps, lc.describe(), endpoints)
	}

	start := time.Now()
	if err := b.prepare(ctx); err != nil {
		return res, err
	}
	perSet := cfg.Rounds * cfg.Clients * cfg.Lifecycles
	fmt.Fprintf(out, "prepared %d accounts and %d jobs in %s\n",
		2*len(b.lifecycles)*cfg.Accounts, 2*len(b.lifecycles)*perSet, time.Since(start).Round(time.Millisecond))
	var pre *bench
	if !cfg.SkipPreOutbox {
		var closePre func()
		if pre, closePre, err = preOutbox(ctx, b); err != nil {
			return res, err
		}
		defer closePre()
		fmt.Fprintf(out, "pre-outbox ledger: schema %s, the same functions without the xid default and indexes; %d accounts and %d jobs prepared\n",
			preOutboxSchema, len(pre.lifecycles)*cfg.Accounts, len(pre.lifecycles)*perSet)
	}

	conflictsBefore, err := b.conflicts(ctx)
	if err != nil {
		return res, err
	}
	cp := &checkpointer{b: b, refused: cfg.SkipCheckpoints}
	for round := 1; round <= cfg.Rounds; round++ {
		for _, lc := range b.lifecycles {
			raw, err := cp.side(ctx, func() (Figures, error) {
				return b.measure(ctx, lc, func() (Figures, error) { return b.runRaw(ctx, lc, round) })
			})
			if err != nil {
				return res, err
			}
			lc.result.RawRounds = append(lc.result.RawRounds, raw)
			fmt.Fprintf(out, "round %d  %-14s  raw SQL (pgbench)     %s\n", round, lc.label(), raw)

			goSide, err := cp.side(ctx, func() (Figures, error) {
				return b.measure(ctx, lc, func() (Figures, error) { return b.runGo(ctx, lc, round) })
			})
			if err != nil {
				return res, err
			}
			lc.result.GoRounds = append(lc.result.GoRounds, goSide)
			fmt.Fprintf(out, "round %d  %-14s  Go API (ledgerdb)     %s\n", round, lc.label(), goSide)

			if plc := pre.lifecycleTagged(lc.tag); plc != nil {
				preSide, err := cp.side(ctx, func() (Figures, error) { return pre.runGo(ctx, plc, round) })
				if err != nil {
					return res, err
				}
				lc.result.PreOutboxRounds = append(lc.result.PreOutboxRounds, preSide)
				fmt.Fprintf(out, "round %d  %-14s  Go API, pre-outbox    %s\n", round, lc.label(), preSide)
			}
		}
	}

	conflictsAfter, err := b.conflicts(ctx)
	if err != nil {
		return res, err
	}
	res.Conflicts = conflictsAfter.minus(conflictsBefore)
	fmt.Fprintf(out, "%s\n", res.Conflicts)
	if res.Verified, err = b.verify(ctx); err != nil {
		return res, err
	}
	if pre != nil {
		if _, err := pre.verify(ctx); err != nil {
			return res, err
		}
	}
	v := res.Verified
	fmt.Fprintf(out, "verified: fixed %d jobs recovered at their price, %d ledger rows (3 per lifecycle); metered %d jobs recovered and settled at their usage, %d ledger rows (4 per lifecycle); %d accounts with balance = sum of rows = grant - what their jobs are charged, none awaiting a reclaim, audit clean; %d credit blocks, every row's moves as the ledger functions make them, each side's blocks holding as much as the other's; %d charges and reclaims of fixed+blocks drawing across blocks; %d webhook events on the accounts with endpoints, one per charge, refund and reclaim row, each delivered",
		v.FixedJobs, v.FixedRows, v.MeteredJobs, v.MeteredRows, v.Accounts, v.Blocks, v.CrossingDraws, v.Events)
	if pre != nil {
		fmt.Fprint(out, "; the pre-outbox ledger's money likewise")
	}
	fmt.Fprintln(out)

	for _, lc := range b.lifecycles {
		c := lc.result
		c.Raw, c.Go = median(c.RawRounds), median(c.GoRounds)
		c.Ratio = c.Go.LifecyclesPerSec / c.Raw.LifecyclesPerSec
		fmt.Fprintf(out, "median   %-14s  raw SQL (pgbench)     %s\n", lc.label(), c.Raw)
		fmt.Fprintf(out, "median   %-14s  Go API (ledgerdb)     %s\n", lc.label(), c.Go)
		if len(c.PreOutboxRounds) > 0 {
			c.PreOutbox = median(c.PreOutboxRounds)
			c.OverPreOutbox = c.Go.LifecyclesPerSec / c.PreOutbox.LifecyclesPerSec
			fmt.Fprintf(out, "median   %-14s  Go API, pre-outbox    %s\n", lc.label(), c.PreOutbox)
		}
	}
	for _, lc := range b.lifecycles {
		c := lc.result
		fmt.Fprintf(out, "ratio Go/raw, %-15s %.3f", lc.label()+":", c.Ratio)
		if c.OverPreOutbox > 0 {
			fmt.Fprintf(out, "   Go/pre-outbox Go %.3f", c.OverPreOutbox)
		}
		if c.CPURatio = cpuRatio(c.Raw, c.Go); c.CPURatio > 0 {
			fmt.Fprintf(out, "   machine CPU per lifecycle, raw/Go %.3f", c.CPURatio)
			if over := cpuRatio(c.PreOutbox, c.Go); over > 0 {
				fmt.Fprintf(out, ", pre-outbox/Go %.3f", over)
			}
		}
		fmt.Fprintln(out)
	}
	return res, nil
}

// only keeps the lifecycles whose labels are named, in their own order; none named keeps them all.
func only(lifecycles []*lifecycle, names []string) ([]*lifecycle, error) {
	if len(names) == 0 {
		return lifecycles, nil
	}
	labels := make([]string, len(lifecycles))
	for i, lc := range lifecycles {
		labels[i] = lc.label()
	}
	for _, name := range names {
		if !slices.Contains(labels, name) {
			return nil, fmt.Errorf("ledgerbench: no lifecycle %q (there are %s)", name, strings.Join(labels, ", "))
		}
	}
	return slices.DeleteFunc(slices.Clone(lifecycles), func(lc *lifecycle) bool { return !slices.Contains(names, lc.label()) }), nil
}

// measure runs one side's round of a lifecycle: for a lifecycle with endpoints, with a delivery
// worker running through it and until its events are delivered (hooks.during).
func (b *bench) measure(ctx context.Context, lc *lifecycle, round func() (Figures, error)) (Figures, error) {
	if !lc.hooked {
		return round()
	}
	return b.hooks.during(ctx, round)
}

// lifecycleTagged is the bench's lifecycle with the tag; nil on a nil bench or when it has none.
func (b *bench) lifecycleTagged(tag string) *lifecycle {
	if b == nil {
		return nil
	}
	for _, lc := range b.lifecycles {
		if lc.tag == tag {
			return lc
		}
	}
	return nil
}

// String is one line of figures as Run prints them.
func (f Figures) String() string {
	s := fmt.Sprintf("%8.1f lifecycles/s  %8.1f transitions/s  mean latency %7.3f ms/lifecycle (%.3f ms/transition)  %.2f round trips/lifecycle",
		f.LifecyclesPerSec, f.TransitionsPerSec, ms(f.MeanLatency), ms(f.MeanLatency)/TransitionsPerLifecycle, f.RoundTripsPerLifecycle)
	s += fmt.Sprintf("  p99 %.3f ms/lifecycle", ms(f.P99Lifecycle))
	if f.P99Transition > 0 {
		s += fmt.Sprintf(" (%.3f ms/transition)", ms(f.P99Transition))
	}
	if f.Drain > 0 {
		s += fmt.Sprintf("  events all delivered %.2f s after the round", f.Drain.Seconds())
	}
	if f.MachineCPU > 0 {
		s += fmt.Sprintf("  machine CPU %.3f ms/lifecycle", ms(f.MachineCPU))
	}
	if f.Elapsed > 0 {
		s += fmt.Sprintf("  [%d lifecycles in %.2f s, load %.2f", f.Lifecycles, f.Elapsed.Seconds(), f.LoadAverage)
		if f.FromCheckpoint {
			s += ", from a checkpoint"
		}
		s += fmt.Sprintf(", %d checkpoints during it]", f.Checkpoints)
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cpuRatio is a.MachineCPU / b.MachineCPU; 0 when either is unknown.
func cpuRatio(a, b Figures) float64 {
	if a.MachineCPU <= 0 || b.MachineCPU <= 0 {
		return 0
	}
	return float64(a.MachineCPU) / float64(b.MachineCPU)
}

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
		P99Lifecycle:           time.Duration(pick(func(f Figures) float64 { return float64(f.P99Lifecycle) })),
		P99Transition:          time.Duration(pick(func(f Figures) float64 { return float64(f.P99Transition) })),
		Drain:                  time.Duration(pick(func(f Figures) float64 { return float64(f.Drain) })),
		MachineCPU:             time.Duration(pick(func(f Figures) float64 { return float64(f.MachineCPU) })),
	}
}
