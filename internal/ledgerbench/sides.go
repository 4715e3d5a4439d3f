package ledgerbench

// The conditions of each side's round: where the checkpoint cycle stands, and the CPU the whole
// machine spent on it.
//
// Every side starts from a checkpoint. After a checkpoint, the first change of each page writes
// the whole page to the WAL (full_page_writes), so a side that ran just after one wrote several
// times the WAL of a side that ran late in a checkpoint's cycle: with rounds of half a minute and
// checkpoints every few rounds (max_wal_size), which side paid for them decided the ratio more
// than either side's statements did. A checkpoint before each side puts every side at the start
// of a cycle, and each round's line says how many more began while it ran.
//
// The machine's busy CPU over the round (/proc/stat: every process, Postgres, the client and the
// kernel), per lifecycle, is the steadier figure on a machine the benchmark itself saturates:
// throughput also moves with how the scheduler shares 2 cores among 16 backends and a client,
// the CPU a lifecycle costs much less. It counts everything the machine did meanwhile, so it
// means something only on an otherwise idle machine.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// checkpointer starts sides from a checkpoint when the role may take one (PostgreSQL 15's
// pg_checkpoint, which scripts/ensure-postgres.sh grants the schema's owner) and the run asks for
// it, and counts the checkpoints that began during a side.
type checkpointer struct {
	b *bench
	// refused is set once CHECKPOINT was refused, or from the start with
	// Config.SkipCheckpoints: sides then start wherever the cycle stands.
	refused bool
}

// side runs one side's round after a checkpoint and records how many checkpoints began while it
// ran, and the machine's CPU per lifecycle.
func (c *checkpointer) side(ctx context.Context, round func() (Figures, error)) (Figures, error) {
	if err := c.checkpoint(ctx); err != nil {
		return Figures{}, err
	}
	before, err := c.count(ctx)
	if err != nil {
		return Figures{}, err
	}
	busyBefore, known := machineBusy()
	f, err := round()
	if err != nil {
		return f, err
	}
	busyAfter, _ := machineBusy()
	after, err := c.count(ctx)
	if err != nil {
		return f, err
	}
	f.Checkpoints = after - before
	f.FromCheckpoint = !c.refused
	if known && f.Lifecycles > 0 {
		f.MachineCPU = (busyAfter - busyBefore) / time.Duration(f.Lifecycles)
	}
	return f, nil
}

// ticksPerSecond is the kernel's USER_HZ, the unit of /proc/stat: 100 on every Linux this runs on.
const ticksPerSecond = 100

// machineBusy is the CPU time all of the machine's cores have spent busy since boot: every state
// of /proc/stat's cpu line but idle and iowait. false where /proc/stat cannot be read.
func machineBusy() (time.Duration, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, false
	}
	var busy int64
	// user nice system idle iowait irq softirq steal: idle (3) and iowait (4) are not busy.
	for i, field := range fields[1:9] {
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, false
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / ticksPerSecond, true
}

// checkpoint takes one, or says once that the role may not.
func (c *checkpointer) checkpoint(ctx context.Context) error {
	if c.refused {
		return nil
	}
	_, err := c.b.pool.Exec(ctx, "CHECKPOINT")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		c.refused = true
		fmt.Fprintf(c.b.out, "the role may not CHECKPOINT (%s): sides start wherever the checkpoint cycle stands; grant it pg_checkpoint (make db does)\n", pgErr.Message)
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledgerbench: checkpoint before a side: %w", err)
	}
	return nil
}

// count reads how many checkpoints the server has begun (timed and requested, this one's
// included).
func (c *checkpointer) count(ctx context.Context) (int64, error) {
	var n int64
	if _, err := c.b.pool.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return 0, fmt.Errorf("ledgerbench: %w", err)
	}
	if err := c.b.pool.QueryRow(ctx, "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter").Scan(&n); err != nil {
		return 0, fmt.Errorf("ledgerbench: reading pg_stat_bgwriter: %w", err)
	}
	return n, nil
}
