package ledgerbench

// Every side starts from a checkpoint. After a checkpoint, the first change of each page writes
// the whole page to the WAL (full_page_writes), so a side that ran just after one wrote several
// times the WAL of a side that ran late in a checkpoint's cycle: with rounds of half a minute and
// checkpoints every few rounds (max_wal_size), which side paid for them decided the ratio more
// than either side's statements did. A checkpoint before each side puts every side at the start
// of a cycle, and each round's line says how many more began while it ran.

import (
	"context"
	"errors"
	"fmt"

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
// ran.
func (c *checkpointer) side(ctx context.Context, round func() (Figures, error)) (Figures, error) {
	if err := c.checkpoint(ctx); err != nil {
		return Figures{}, err
	}
	before, err := c.count(ctx)
	if err != nil {
		return Figures{}, err
	}
	f, err := round()
	if err != nil {
		return f, err
	}
	after, err := c.count(ctx)
	if err != nil {
		return f, err
	}
	f.Checkpoints = after - before
	f.FromCheckpoint = !c.refused
	return f, nil
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
