package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
)

// Derive runs one derive pass (ledger_webhook_derive): it writes the events of the money
// transitions committed since the last pass — at most limit transactions' worth, for accounts
// that have an enabled endpoint — and queues them for delivery. It answers how many events it
// wrote and whether more transactions wait for another pass. Only one pass runs at a time across
// every worker; a call that finds one running answers 0, false at once.
func (s *Store) Derive(ctx context.Context, limit int) (derived int, more bool, err error) {
	if limit < 1 {
		return 0, false, &ledgerdb.InvalidInputError{Field: "limit", Reason: "must be above zero"}
	}
	// A replay derives its own account's rows beside the passes, so the two can meet on a job's
	// events and one be aborted as a deadlock victim: send it again.
	err = ledgerdb.ResendOnDeadlock(func() error {
		return s.pool.QueryRow(ctx, `SELECT derived, more FROM ledger_webhook_derive($1)`, limit).Scan(&derived, &more)
	})
	if err != nil {
		return 0, false, fmt.Errorf("deriving webhook events: %w", err)
	}
	return derived, more, nil
}

// CatchUp derives until every transition committed before the call has had its event derived:
// until the derive cursor passes every transaction that had begun by then. It waits, polling, for
// transactions still open (a pass never reads past them) and for passes other workers run, until
// ctx is done. Operators' flushes and tests use it; workers simply derive every round.
func (s *Store) CatchUp(ctx context.Context) error {
	var target string
	if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&target); err != nil {
		return err
	}
	for {
		for {
			_, more, err := s.Derive(ctx, 1000)
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
		var done bool
		if err := s.pool.QueryRow(ctx, `SELECT horizon >= $1::xid8 FROM webhook_derive_cursor`, target).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deriving webhook events up to transaction %s: %w", target, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
