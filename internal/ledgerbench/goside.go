package ledgerbench

// The Go side: the lifecycles through ledgerdb's Store, one goroutine per client.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/ledgerdb"
)

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
