package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/jobbill/jobbill/ledgerdb"
)

// DefaultExpiryBatch is how many blocks one ledger call of an expiry pass expires at most: one
// transaction holds the locks of that many accounts, and the pass calls again until none is due.
const DefaultExpiryBatch = 100

// ExpiryInput configures one expiry pass.
type ExpiryInput struct {
	// Batch is how many blocks one ledger call expires at most, 1 to
	// ledgerdb.MaxExpiriesPerCall; DefaultExpiryBatch when zero.
	Batch int `json:",omitempty"`
}

// ExpiryResult counts what one expiry pass did.
type ExpiryResult struct {
	// Batches counts the ledger calls the pass made.
	Batches int
	// BlocksExpired counts the expire rows written: blocks whose remaining credits the pass
	// removed. A due block that held nothing is marked expired with no row and is not counted.
	BlocksExpired int
	// CreditsExpired is what those rows removed, in credits (a positive number).
	CreditsExpired int64
}

// BlockExpirer expires due credit blocks: [ledgerdb.Store.ExpireBlocks]. It is an interface so
// that a test can make one call fail on the real ledger.
type BlockExpirer interface {
	// ExpireBlocks expires up to limit due blocks, each once, answers the rows written and whether
	// blocks may remain due.
	ExpireBlocks(ctx context.Context, limit int) ([]ledgerdb.Expiry, bool, error)
}

// Expirer is the expiry pass: it removes what remains of each credit block whose expiry has
// passed. Its dependencies are fields, in the style of [Activities]; the worker registers it
// beside them.
type Expirer struct {
	// Ledger expires the blocks: the worker's *ledgerdb.Store.
	Ledger BlockExpirer
	// HeartbeatEvery is how often the pass heartbeats while it works; DefaultPassHeartbeat when
	// zero.
	HeartbeatEvery time.Duration
	// Metrics counts the blocks expired and the credits removed (a *metrics.Metrics); nil
	// records nothing.
	Metrics ExpiryRecorder
}

// ExpiryRecorder records what the expiry removed. It is an interface for the reason
// LedgerRecorder is: the metrics package imports this one's callers.
type ExpiryRecorder interface {
	// CreditsExpired records one batch's expiries: blocks whose remaining credits were removed,
	// and how many credits that was.
	CreditsExpired(blocks int, credits int64)
}

// ExpireBlocks is one expiry pass: it calls the ledger's expiry in batches until no block is due,
// and answers how many blocks it expired and how many credits that removed. Each block expires in
// the ledger exactly once whoever asks (one expire row per block, held by a unique index), so the
// pass is safe to retry after any failure and to run beside another pass: a retry or a second
// pass finds the blocks already expired and writes nothing for them. A batch the ledger refuses
// for good (a batch size out of range) fails the pass without a retry, having written nothing;
// any other failure (a lost connection) is retried by the workflow, and the next run of the
// schedule takes over after that.
func (e *Expirer) ExpireBlocks(ctx context.Context, in ExpiryInput) (ExpiryResult, error) {
	batch := in.Batch
	if batch == 0 {
		batch = DefaultExpiryBatch
	}
	// What a dead attempt expired is done: its retry finds those blocks expired and counts on
	// from the attempt's last heartbeat.
	progress := newPassProgress(ctx, func(earlier ExpiryResult) ExpiryResult { return earlier }, nil)
	stop := progress.heartbeatEvery(ctx, passHeartbeat(e.HeartbeatEvery))
	defer stop()
	for {
		expiries, more, err := e.Ledger.ExpireBlocks(ctx, batch)
		if err != nil {
			return progress.result(), ledgerError(err)
		}
		var credits int64
		for _, x := range expiries {
			credits -= x.Amount
		}
		progress.update(func() {
			progress.out.Batches++
			progress.out.BlocksExpired += len(expiries)
			progress.out.CreditsExpired += credits
		})
		if e.Metrics != nil && len(expiries) > 0 {
			e.Metrics.CreditsExpired(len(expiries), credits)
		}
		if !more {
			break
		}
		if ctx.Err() != nil {
			// The activity was cancelled or timed out: the rest waits for the next pass.
			return progress.result(), ctx.Err()
		}
	}
	final := progress.result()
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Info("Expiry pass done.", "Batches", final.Batches,
			"BlocksExpired", final.BlocksExpired, "CreditsExpired", final.CreditsExpired)
	}
	return final, nil
}
