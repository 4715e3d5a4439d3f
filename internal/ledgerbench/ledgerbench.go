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
// per transition under pgbench -M prepared. What differs is the server's work behind each round
// trip; BENCHMARKS.md has the figures and what the gap was traced to.
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

// The raw-SQL side, one lifecycle per pgbench transaction: the opening both lifecycles share
// (charge, refund, duplicate refund), then each one's last transition. Run joins them into one
// script per lifecycle.
var (
	//go:embed lifecycle.sql
	openingScript string
	//go:embed reclaim.sql
	reclaimScript string
	//go:embed settle.sql
	settleScript string
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
}

// Comparison is one lifecycle's figures on both sides of a run.
type Comparison struct {
	// Lifecycle is the lifecycle measured.
	Lifecycle Lifecycle
	// RawRounds and GoRounds are each round's figures, in the order they ran.
	RawRounds, GoRounds []Figures
	// Raw and Go are the medians of the rounds.
	Raw, Go Figures
	// Ratio is Go.LifecyclesPerSec / Raw.LifecyclesPerSec: 1.0 means the Go API keeps up with
	// the raw SQL.
	Ratio float64
}

// Result is the outcome of one Run.
type Result struct {
	// Prefix starts the ID of every account the run created, and the ID (after its account's) of
	// every job.
	Prefix string
	// Config is the configuration the run used, defaults filled in.
	Config Config
	// Fixed and Metered are the two lifecycles' figures.
	Fixed, Metered Comparison
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

	b := &bench{cfg: cfg, pool: pool, store: store, tracer: tracer, pgbench: pgbench, out: out, prefix: newPrefix(), dir: dir}
	res := Result{Prefix: b.prefix, Config: cfg, Fixed: Comparison{Lifecycle: Fixed}, Metered: Comparison{Lifecycle: Metered}}
	b.lifecycles = []*lifecycle{
		{name: Fixed, tag: "f", steps: "charge, refund, duplicate refund, reclaim", price: fixedPrice, last: reclaimScript, rows: 3, result: &res.Fixed},
		{name: Metered, tag: "m", steps: "charge, refund, duplicate refund, settle", price: meteredPrice, last: settleScript, rows: 4, result: &res.Metered},
	}
	fmt.Fprintf(out, "ledger lifecycle benchmark: prefix %s, %d clients × %d lifecycles per round, side and lifecycle, %d accounts per side and lifecycle, %d rounds, %d transitions per lifecycle\n",
		b.prefix, cfg.Clients, cfg.Lifecycles, cfg.Accounts, cfg.Rounds, TransitionsPerLifecycle)
	for _, lc := range b.lifecycles {
		if err := lc.setUp(ctx, store, dir); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "lifecycle %-8s %s; %s\n", lc.name+":", lc.steps, lc.describe())
	}

	start := time.Now()
	if err := b.prepare(ctx); err != nil {
		return res, err
	}
	perSet := cfg.Rounds * cfg.Clients * cfg.Lifecycles
	fmt.Fprintf(out, "prepared %d accounts and %d jobs in %s\n",
		2*len(b.lifecycles)*cfg.Accounts, 2*len(b.lifecycles)*perSet, time.Since(start).Round(time.Millisecond))

	conflictsBefore, err := b.conflicts(ctx)
	if err != nil {
		return res, err
	}
	for round := 1; round <= cfg.Rounds; round++ {
		for _, lc := range b.lifecycles {
			raw, err := b.runRaw(ctx, lc, round)
			if err != nil {
				return res, err
			}
			lc.result.RawRounds = append(lc.result.RawRounds, raw)
			fmt.Fprintf(out, "round %d  %-7s  raw SQL (pgbench)  %s\n", round, lc.name, raw)

			goSide, err := b.runGo(ctx, lc, round)
			if err != nil {
				return res, err
			}
			lc.result.GoRounds = append(lc.result.GoRounds, goSide)
			fmt.Fprintf(out, "round %d  %-7s  Go API (ledgerdb)  %s\n", round, lc.name, goSide)
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
	v := res.Verified
	fmt.Fprintf(out, "verified: fixed %d jobs recovered at their price, %d ledger rows (3 per lifecycle); metered %d jobs recovered and settled at their usage, %d ledger rows (4 per lifecycle); %d accounts with balance = sum of rows = grant - what their jobs are charged, none awaiting a reclaim, audit clean\n",
		v.FixedJobs, v.FixedRows, v.MeteredJobs, v.MeteredRows, v.Accounts)

	for _, lc := range b.lifecycles {
		c := lc.result
		c.Raw, c.Go = median(c.RawRounds), median(c.GoRounds)
		c.Ratio = c.Go.LifecyclesPerSec / c.Raw.LifecyclesPerSec
		fmt.Fprintf(out, "median   %-7s  raw SQL (pgbench)  %s\n", lc.name, c.Raw)
		fmt.Fprintf(out, "median   %-7s  Go API (ledgerdb)  %s\n", lc.name, c.Go)
	}
	for _, lc := range b.lifecycles {
		fmt.Fprintf(out, "ratio Go/raw, %-8s %.3f\n", lc.name+":", lc.result.Ratio)
	}
	return res, nil
}

// String is one line of figures as Run prints them.
func (f Figures) String() string {
	s := fmt.Sprintf("%8.1f lifecycles/s  %8.1f transitions/s  mean latency %7.3f ms/lifecycle (%.3f ms/transition)  %.2f round trips/lifecycle",
		f.LifecyclesPerSec, f.TransitionsPerSec, ms(f.MeanLatency), ms(f.MeanLatency)/TransitionsPerLifecycle, f.RoundTripsPerLifecycle)
	s += fmt.Sprintf("  p99 %.3f ms/lifecycle", ms(f.P99Lifecycle))
	if f.P99Transition > 0 {
		s += fmt.Sprintf(" (%.3f ms/transition)", ms(f.P99Transition))
	}
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
		P99Lifecycle:           time.Duration(pick(func(f Figures) float64 { return float64(f.P99Lifecycle) })),
		P99Transition:          time.Duration(pick(func(f Figures) float64 { return float64(f.P99Transition) })),
	}
}

// newPrefix is a fresh run prefix: the time for a human reading the tables, random hex so that
// two runs in the same second still differ.
func newPrefix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "lb" + time.Now().UTC().Format("060102150405") + hex.EncodeToString(b[:])
}

// lifecycle is one of the measured lifecycles as a run sets it up.
type lifecycle struct {
	name Lifecycle
	// tag marks the lifecycle in account and job IDs.
	tag string
	// steps lists the transitions, for the report.
	steps string
	// price is the kind's price; after setUp, as the price list holds it (its version included).
	price ledgerdb.Price
	// last is the raw script's last transition, appended to the shared opening.
	last string
	// script is the path of the lifecycle's whole pgbench script, written by setUp.
	script string
	// rows is how many ledger rows one lifecycle writes: the duplicate refund writes none.
	rows int
	// result collects the lifecycle's figures.
	result *Comparison
}

// setUp puts the lifecycle's kind on the price list (or finds it there) and writes its pgbench
// script into dir.
func (lc *lifecycle) setUp(ctx context.Context, store *ledgerdb.Store, dir string) error {
	price, _, err := store.SetPrice(ctx, lc.price)
	if err != nil {
		return fmt.Errorf("ledgerbench: %w", err)
	}
	lc.price = price
	lc.script = filepath.Join(dir, string(lc.name)+".sql")
	if err := os.WriteFile(lc.script, []byte(openingScript+"\n"+lc.last), 0o600); err != nil {
		return fmt.Errorf("ledgerbench: %w", err)
	}
	return nil
}

// describe says the lifecycle's price and what it bills, for the report.
func (lc *lifecycle) describe() string {
	p := lc.price
	if p.Unit == ledgerdb.UnitJob {
		return fmt.Sprintf("kind %s v%d, %d credits per job; %d ledger rows", p.Kind, p.Version, p.UnitPrice, lc.rows)
	}
	return fmt.Sprintf("kind %s v%d, %d credits per %s, hold %d units = %d credits, n mod %d units used; %d ledger rows",
		p.Kind, p.Version, p.UnitPrice, p.Unit, p.MaxUnits, p.Hold(), p.MaxUnits, lc.rows)
}

// unitsUsed is the usage the metered lifecycle reports for a client's nth job, as settle.sql
// computes it: below the hold, so that every job has a release row, and different from one job
// to the next, so that a release taken from the wrong job's usage shows in the verification.
func (lc *lifecycle) unitsUsed(n int) int64 { return int64(n) % lc.price.MaxUnits }

type bench struct {
	cfg     Config
	pool    *pgxpool.Pool
	store   *ledgerdb.Store
	tracer  *roundTrips
	pgbench string
	// dir holds the run's scripts and pgbench's transaction logs.
	dir        string
	out        io.Writer
	prefix     string
	lifecycles []*lifecycle
}

// The two sides, as they appear in IDs.
const (
	sideRaw = "r"
	sideGo  = "g"
)

// accountsPrefix starts the IDs of every account of a side and lifecycle.
func (b *bench) accountsPrefix(side string, lc *lifecycle) string {
	return fmt.Sprintf("%s-%s%sa-", b.prefix, side, lc.tag)
}

// accountID is account i (0-based) of a side and lifecycle.
func (b *bench) accountID(side string, lc *lifecycle, i int) string {
	return b.accountsPrefix(side, lc) + strconv.Itoa(i)
}

// jobsPrefix starts the IDs of every job of a side and lifecycle, in every round.
func (b *bench) jobsPrefix(side string, lc *lifecycle) string {
	return fmt.Sprintf("%s-%s%s", b.prefix, side, lc.tag)
}

// runPrefix starts the IDs of one side's jobs of a lifecycle in one round; pgbench gets it as
// -D run=....
func (b *bench) runPrefix(side string, lc *lifecycle, round int) string {
	return fmt.Sprintf("%s%d", b.jobsPrefix(side, lc), round)
}

// jobID is the ID of a client's nth job (1-based, as the script's counter) in a round.
// lifecycle.sql builds the same ID as run || '-' || client_id || '-' || n, and the verification
// reads n back from its last part.
func (b *bench) jobID(side string, lc *lifecycle, round, client, n int) string {
	return fmt.Sprintf("%s-%d-%d", b.runPrefix(side, lc, round), client, n)
}

// accountStride spreads a client's jobs over the accounts: see accountIndex.
const accountStride = 7919

// accountIndex is the account (0-based) of a client's nth job, on each side, lifecycle and
// round alike, so that both sides meet the same contention on account rows: (client + n ×
// accountStride) mod accounts. lifecycle.sql computes the same number from pgbench's client_id
// and its counter n (given the stride and the count with -D), so the raw side finds each job
// under the key the Go side put it at. The spread is not n mod accounts, which would march every
// client over the same accounts in step: each client starts at its own account (clients in step
// never share one, with no more clients than accounts), and the prime stride makes a client's
// next job jump far across the accounts rather than onto the one its neighbour just left, so that
// clients meet on an account only where they drift out of step, as with a random spread. (Were
// accounts a multiple of the stride, each client would stay on one account.)
func (b *bench) accountIndex(client, n int) int {
	return (client + n*accountStride) % b.cfg.Accounts
}

// jobKey is the key of a client's nth job in a round: its account, accountIndex, and jobID.
func (b *bench) jobKey(side string, lc *lifecycle, round, client, n int) ledgerdb.JobKey {
	return ledgerdb.JobKey{AccountID: b.accountID(side, lc, b.accountIndex(client, n)), JobID: b.jobID(side, lc, round, client, n)}
}

// prepare opens each side's accounts for each lifecycle with a grant and writes every round's
// placeholder jobs, in bulk and before any timing, so that neither side pays for set-up. The rows
// are what the API would write: a grant row with its balance_after; a submitting job at its
// kind's current price, holding the kind's maximum of units (cost = unit price × held units,
// as the schema's jobs_price_recorded check requires), with its fingerprint and an empty request.
func (b *bench) prepare(ctx context.Context) error {
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, lc := range b.lifecycles {
			for _, side := range []string{sideRaw, sideGo} {
				ids := make([]string, b.cfg.Accounts)
				for i := range ids {
					ids[i] = b.accountID(side, lc, i)
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
		}

		var jobs, requests [][]any
		for round := 1; round <= b.cfg.Rounds; round++ {
			for _, lc := range b.lifecycles {
				p := lc.price
				// Both sides spread their jobs over their accounts alike (accountIndex), hence
				// meet the same contention on account rows.
				for _, side := range []string{sideRaw, sideGo} {
					for client := range b.cfg.Clients {
						for n := 1; n <= b.cfg.Lifecycles; n++ {
							key := b.jobKey(side, lc, round, client, n)
							sub := ledgerdb.Submission{JobID: key.JobID, AccountID: key.AccountID, Kind: p.Kind}
							jobs = append(jobs, []any{key.String(), sub.AccountID, p.Hold(), sub.Fingerprint(),
								p.Kind, int32(p.Version), string(p.Unit), p.UnitPrice, p.MaxUnits})
							requests = append(requests, []any{key.String(), []byte{}})
						}
					}
				}
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"},
			[]string{"id", "account_id", "cost", "request_fingerprint", "kind", "price_version", "unit", "unit_price", "held_units"},
			pgx.CopyFromRows(jobs)); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"job_requests"}, []string{"job_id", "request"}, pgx.CopyFromRows(requests))
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

// runRaw runs one round of a lifecycle's raw-SQL side under pgbench.
func (b *bench) runRaw(ctx context.Context, lc *lifecycle, round int) (Figures, error) {
	// -M prepared: each client parses each statement once, as pgx's statement cache does on the
	// Go side. -n: there are no pgbench tables to vacuum. n=0 seeds each client's counter; the
	// accounts' prefix, their count and the stride give each job's account (accountIndex); held
	// is what settle.sql derives the usage from.
	args := []string{"-n", "-M", "prepared",
		"-c", strconv.Itoa(b.cfg.Clients), "-j", strconv.Itoa(b.cfg.PgbenchThreads), "-t", strconv.Itoa(b.cfg.Lifecycles),
		"-D", "run=" + b.runPrefix(sideRaw, lc, round), "-D", "n=0",
		"-D", "accounts_prefix=" + b.accountsPrefix(sideRaw, lc), "-D", "accounts=" + strconv.Itoa(b.cfg.Accounts),
		"-D", "stride=" + strconv.Itoa(accountStride)}
	if lc.name == Metered {
		args = append(args, "-D", "held="+strconv.FormatInt(lc.price.MaxUnits, 10))
	}
	logPrefix := filepath.Join(b.dir, fmt.Sprintf("raw-%s-%d", lc.tag, round))
	args = append(args, "-l", "--log-prefix", logPrefix)
	args = append(args, "-f", lc.script, b.cfg.DatabaseURL)
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
		return Figures{}, fmt.Errorf("ledgerbench: pgbench did not process all %d %s lifecycles:\n%s", expected, lc.name, report)
	}
	if f := pgbenchFailed.FindStringSubmatch(report); f == nil || f[1] != "0" {
		return Figures{}, fmt.Errorf("ledgerbench: pgbench reported failed %s lifecycles:\n%s", lc.name, report)
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
		fmt.Fprintf(b.out, "raw side command, %s: %s\n", lc.name, shown)
	}
	p99, err := pgbenchP99(logPrefix)
	if err != nil {
		return Figures{}, fmt.Errorf("ledgerbench: %w", err)
	}
	return Figures{
		P99Lifecycle:           p99,
		Lifecycles:             expected,
		Elapsed:                time.Duration(float64(expected) / rate * float64(time.Second)),
		LifecyclesPerSec:       rate,
		TransitionsPerSec:      rate * TransitionsPerLifecycle,
		MeanLatency:            time.Duration(latency * float64(time.Millisecond)),
		RoundTripsPerLifecycle: TransitionsPerLifecycle,
		LoadAverage:            load,
	}, nil
}

// runGo runs one round of a lifecycle's Go side: one goroutine per client, each walking its own
// jobs through the Store exactly as the workflow would, and checking every outcome.
func (b *bench) runGo(ctx context.Context, lc *lifecycle, round int) (Figures, error) {
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
	tails := make([]tail, b.cfg.Clients)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for client := range b.cfg.Clients {
		wg.Go(func() {
			<-begin
			for n := 1; n <= b.cfg.Lifecycles; n++ {
				t0 := time.Now()
				if err := b.walk(ctx, lc, b.jobKey(sideGo, lc, round, client, n), n, tails[client].transition); err != nil {
					cancel(err)
					return
				}
				took := time.Since(t0)
				latencies[client] += took
				tails[client].lifecycles = append(tails[client].lifecycles, took)
			}
		})
	}
	start := time.Now()
	close(begin)
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return Figures{}, fmt.Errorf("ledgerbench: Go side, %s lifecycle, round %d: %w", lc.name, round, err)
	}

	total := b.cfg.Clients * b.cfg.Lifecycles
	var sum time.Duration
	for _, l := range latencies {
		sum += l
	}
	rate := float64(total) / elapsed.Seconds()
	p99Lifecycle, p99Transition := p99s(tails)
	return Figures{
		P99Lifecycle:           p99Lifecycle,
		P99Transition:          p99Transition,
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

// walk is one job's lifecycle through the API: charge, refund, duplicate refund, then the late
// result: a reclaim (fixed) or a settlement at the nth job's usage (metered), which reclaims and
// releases in one call as the workflow's settle step does. Any outcome other than the expected
// one is an error, so the figure counts only correct work.
func (b *bench) walk(ctx context.Context, lc *lifecycle, job ledgerdb.JobKey, n int, took func(time.Duration)) error {
	last := time.Now()
	expect := func(step string, t ledgerdb.Transition, err error, want ledgerdb.Outcome) error {
		now := time.Now()
		took(now.Sub(last))
		last = now
		if err != nil {
			return fmt.Errorf("%s %s: %w", step, job, err)
		}
		if t.Outcome != want {
			return fmt.Errorf("%s %s: outcome %s, want %s", step, job, t.Outcome, want)
		}
		return nil
	}
	t, err := b.store.Charge(ctx, job)
	if err := expect("charge", t, err, ledgerdb.Applied); err != nil {
		return err
	}
	t, err = b.store.Refund(ctx, job, ledgerdb.ReasonGPUFailed, "bench: work failed", 3)
	if err := expect("refund", t, err, ledgerdb.Applied); err != nil {
		return err
	}
	t, err = b.store.Refund(ctx, job, ledgerdb.ReasonGPUFailed, "bench: work failed", 3)
	if err := expect("duplicate refund", t, err, ledgerdb.AlreadyApplied); err != nil {
		return err
	}
	if lc.name == Metered {
		t, err = b.store.Settle(ctx, job, 3, ledgerdb.Units(lc.unitsUsed(n)), "")
		return expect("settle", t, err, ledgerdb.Applied)
	}
	t, err = b.store.Reclaim(ctx, job)
	return expect("reclaim", t, err, ledgerdb.Applied)
}

// verify checks the money of both sides of both lifecycles after the last round: every job
// recovered at the benchmark's price (and, metered, settled at the usage its side reported), with
// exactly one charge, refund and reclaim row of its hold and, metered, one release row of the
// unused part (rule 2); and every account's balance equal to the sum of its rows (rule 6) and to
// its grant less what its jobs should be charged, with ledgerdb's own Audit clean. A benchmark
// that computed wrong money would be worthless.
func (b *bench) verify(ctx context.Context) (Verification, error) {
	var v Verification
	wantJobs := b.cfg.Rounds * b.cfg.Clients * b.cfg.Lifecycles
	for _, lc := range b.lifecycles {
		for _, side := range []string{sideRaw, sideGo} {
			jobs, rows, err := b.verifyJobs(ctx, side, lc, wantJobs)
			if err != nil {
				return v, err
			}
			ids, err := b.verifyBalances(ctx, side, lc)
			if err != nil {
				return v, err
			}
			if err := b.audit(ctx, ids); err != nil {
				return v, err
			}
			if lc.name == Metered {
				v.MeteredJobs, v.MeteredRows = v.MeteredJobs+jobs, v.MeteredRows+rows
			} else {
				v.FixedJobs, v.FixedRows = v.FixedJobs+jobs, v.FixedRows+rows
			}
			v.Accounts += len(ids)
		}
	}
	return v, nil
}

// verifyJobs checks every job of a side and lifecycle, and answers how many there are and how
// many ledger rows they have. The ledger keys a job as <account>/<job ID>, so the side's jobs are
// those whose ID, after their account's, starts with the side's prefix; each must be on the
// account accountIndex gives its client and n (a job the raw side found on another account than
// the Go side put it would not have been found at all). A metered job's expected usage is read
// back from its ID (n, its last part, mod the hold), the same number both sides reported.
func (b *bench) verifyJobs(ctx context.Context, side string, lc *lifecycle, wantJobs int) (jobs, rows int, err error) {
	p := lc.price
	var sound, charges, refunds, reclaims, releases, badJobs int
	err = b.pool.QueryRow(ctx, `
		WITH p AS (
			SELECT $1::text AS prefix, $2::text AS kind, $3::integer AS version, $4::text AS unit,
			       $5::bigint AS unit_price, $6::bigint AS held, $7::boolean AS metered,
			       $8::text AS accounts_prefix, $9::bigint AS accounts, $10::bigint AS stride
		), j AS (
			SELECT jobs.id, jobs.cost, nullif((p.held - w.used) * p.unit_price, 0) AS release,
			       jobs.account_id = p.accounts_prefix || ((w.client + w.n * p.stride) % p.accounts)::text
			         AND jobs.kind = p.kind AND jobs.price_version = p.version AND jobs.unit = p.unit
			         AND jobs.unit_price = p.unit_price AND jobs.held_units = p.held AND jobs.cost = p.unit_price * p.held
			         AND jobs.state = 'recovered' AND jobs.is_charged AND jobs.is_refunded AND jobs.is_reclaimed
			         AND jobs.is_settled AND jobs.units_used = w.used AS sound
			FROM p, jobs,
			     LATERAL (SELECT split_part(jobs.id, '-', -2)::bigint AS client, split_part(jobs.id, '-', -1)::bigint AS n) k,
			     LATERAL (SELECT k.client, k.n, CASE WHEN p.metered THEN k.n % p.held ELSE p.held END AS used) w
			WHERE starts_with(jobs.account_id, p.accounts_prefix) AND starts_with(jobs.id, jobs.account_id || '/' || p.prefix)
		), e AS (
			SELECT e.job_id, count(*) AS n,
			       sum(e.amount) FILTER (WHERE e.kind = 'charge') AS charge,
			       sum(e.amount) FILTER (WHERE e.kind = 'refund') AS refund,
			       sum(e.amount) FILTER (WHERE e.kind = 'reclaim') AS reclaim,
			       sum(e.amount) FILTER (WHERE e.kind = 'release') AS release
			FROM ledger_entries e JOIN j ON j.id = e.job_id GROUP BY e.job_id
		)
		SELECT (SELECT count(*) FROM j),
		       (SELECT count(*) FROM j WHERE sound),
		       coalesce((SELECT sum(n) FROM e), 0),
		       (SELECT count(charge) FROM e), (SELECT count(refund) FROM e),
		       (SELECT count(reclaim) FROM e), (SELECT count(release) FROM e),
		       (SELECT count(*) FROM j LEFT JOIN e ON e.job_id = j.id
		        WHERE e.n IS DISTINCT FROM 3 + (j.release IS NOT NULL)::int
		           OR e.charge IS DISTINCT FROM -j.cost OR e.refund IS DISTINCT FROM j.cost
		           OR e.reclaim IS DISTINCT FROM -j.cost OR e.release IS DISTINCT FROM j.release)`,
		b.jobsPrefix(side, lc), p.Kind, int32(p.Version), string(p.Unit), p.UnitPrice, p.MaxUnits, lc.name == Metered,
		b.accountsPrefix(side, lc), b.cfg.Accounts, accountStride,
	).Scan(&jobs, &sound, &rows, &charges, &refunds, &reclaims, &releases, &badJobs)
	if err != nil {
		return 0, 0, fmt.Errorf("ledgerbench: verifying the %s jobs of side %s: %w", lc.name, side, err)
	}
	wantReleases := 0
	if lc.name == Metered {
		wantReleases = wantJobs
	}
	if jobs != wantJobs || sound != wantJobs || rows != lc.rows*wantJobs || charges != wantJobs || refunds != wantJobs ||
		reclaims != wantJobs || releases != wantReleases || badJobs != 0 {
		return 0, 0, fmt.Errorf("ledgerbench: MONEY CHECK FAILED on the %s jobs of side %s: want %d jobs, all on the account their client and n give, recovered and settled at %s v%d, with %d rows (%d charges, refunds and reclaims each, %d releases); found %d jobs, %d of them as wanted, %d rows (%d charges, %d refunds, %d reclaims, %d releases), %d jobs whose rows are wrong",
			lc.name, side, wantJobs, p.Kind, p.Version, lc.rows*wantJobs, wantJobs, wantReleases,
			jobs, sound, rows, charges, refunds, reclaims, releases, badJobs)
	}
	return jobs, rows, nil
}

// verifyBalances checks rule 6 for every account of a side and lifecycle, and the balance its jobs
// say it should have: its grant less each job's price (fixed) or usage × unit price (metered),
// the usage read back from the job's ID as verifyJobs does; and, every refund having been
// reclaimed, nothing left awaiting a reclaim. It answers the accounts' IDs.
func (b *bench) verifyBalances(ctx context.Context, side string, lc *lifecycle) ([]string, error) {
	p := lc.price
	accounts, err := b.pool.Query(ctx, `
		SELECT a.id, a.balance, a.awaiting_reclaim,
		       (SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e WHERE e.account_id = a.id),
		       $2::bigint - (SELECT coalesce(sum(CASE WHEN $5::boolean
		                                             THEN (split_part(j.id, '-', -1)::bigint % $4::bigint) * $3::bigint
		                                             ELSE $3::bigint * $4::bigint END), 0)
		                     FROM jobs j WHERE j.account_id = a.id)
		FROM accounts a WHERE starts_with(a.id, $1)`,
		b.accountsPrefix(side, lc), grantPerAccount, p.UnitPrice, p.MaxUnits, lc.name == Metered)
	if err != nil {
		return nil, fmt.Errorf("ledgerbench: verifying the %s accounts of side %s: %w", lc.name, side, err)
	}
	var ids, bad []string
	for accounts.Next() {
		var id string
		var balance, awaiting, sum, want int64
		if err := accounts.Scan(&id, &balance, &awaiting, &sum, &want); err != nil {
			accounts.Close()
			return nil, fmt.Errorf("ledgerbench: verifying the %s accounts of side %s: %w", lc.name, side, err)
		}
		ids = append(ids, id)
		if balance != sum || balance != want || awaiting != 0 {
			bad = append(bad, fmt.Sprintf("%s: balance %d, sum of rows %d, grant less jobs %d, awaiting reclaim %d (want 0: every refund was reclaimed)",
				id, balance, sum, want, awaiting))
		}
	}
	if err := accounts.Err(); err != nil {
		return nil, fmt.Errorf("ledgerbench: verifying the %s accounts of side %s: %w", lc.name, side, err)
	}
	if len(ids) != b.cfg.Accounts || len(bad) > 0 {
		return nil, fmt.Errorf("ledgerbench: MONEY CHECK FAILED on the %s accounts of side %s: %d of %d accounts found; wrong balances:\n%s",
			lc.name, side, len(ids), b.cfg.Accounts, strings.Join(bad, "\n"))
	}
	return ids, nil
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
