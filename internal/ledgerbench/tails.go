package ledgerbench

// The tails of the latency, and what the database says about contention: on a hot account every
// client queues on one row, and a mean hides how long the last one in the queue waited.

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// tail is one Go client's latencies: each lifecycle's, and each ledger call's.
type tail struct {
	lifecycles, transitions []time.Duration
}

func (t *tail) transition(d time.Duration) { t.transitions = append(t.transitions, d) }

// p99s are the 99th percentiles of every client's lifecycles and transitions together.
func p99s(tails []tail) (lifecycle, transition time.Duration) {
	var ls, ts []time.Duration
	for _, t := range tails {
		ls = append(ls, t.lifecycles...)
		ts = append(ts, t.transitions...)
	}
	return p99(ls), p99(ts)
}

// p99 is the nearest-rank 99th percentile; 0 for none.
func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(0.99*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))]
}

// pgbenchP99 reads pgbench's per-transaction logs (-l --log-prefix prefix: one file per thread,
// prefix.<pid>[.<thread>]), whose third field is the transaction's latency in microseconds: one
// transaction is one lifecycle here.
func pgbenchP99(prefix string) (time.Duration, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("pgbench wrote no transaction log at %s.*", prefix)
	}
	var lats []time.Duration
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				f.Close()
				return 0, fmt.Errorf("%s: %q: %w", name, sc.Text(), err)
			}
			lats = append(lats, time.Duration(us)*time.Microsecond)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return 0, err
		}
	}
	return p99(lats), nil
}

// Conflicts are the database's own counts of what contention can cost: deadlocks detected and
// transactions rolled back (pg_stat_database). A serialization failure or a deadlock that reached
// a client would also have failed the run: pgbench counts failed transactions, and the Go side
// stops at the first error.
type Conflicts struct {
	Deadlocks, Rollbacks int64
}

func (c Conflicts) minus(o Conflicts) Conflicts {
	return Conflicts{Deadlocks: c.Deadlocks - o.Deadlocks, Rollbacks: c.Rollbacks - o.Rollbacks}
}

// String is the line Run prints.
func (c Conflicts) String() string {
	return fmt.Sprintf("database during the rounds: %d deadlocks, %d transactions rolled back (pg_stat_database; both sides)",
		c.Deadlocks, c.Rollbacks)
}

// conflicts reads the database's counters. A backend reports its statistics at most once a
// second (PostgreSQL 15), so the read waits that long first, and clears its own snapshot.
func (b *bench) conflicts(ctx context.Context) (Conflicts, error) {
	var c Conflicts
	time.Sleep(1500 * time.Millisecond)
	if _, err := b.pool.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return c, fmt.Errorf("ledgerbench: %w", err)
	}
	err := b.pool.QueryRow(ctx,
		"SELECT deadlocks, xact_rollback FROM pg_stat_database WHERE datname = current_database()").Scan(&c.Deadlocks, &c.Rollbacks)
	if err != nil {
		return c, fmt.Errorf("ledgerbench: reading pg_stat_database: %w", err)
	}
	return c, nil
}
