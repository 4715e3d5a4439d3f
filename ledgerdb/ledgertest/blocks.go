package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/ledgerdb"
)

// GrantBlock grants acct a block of amount credits on terms, under a fresh idempotency key, and
// answers the block the grant created.
func GrantBlock(t testing.TB, s *ledgerdb.Store, acct string, amount int64, terms ledgerdb.BlockTerms) ledgerdb.Block {
	t.Helper()
	ctx := context.Background()
	key := ID(t, "grant")
	if _, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: amount, Key: key, Block: terms}); err != nil {
		t.Fatalf("granting a block of %d to %s: %v", amount, acct, err)
	}
	blocks, err := s.Blocks(ctx, acct)
	if err != nil {
		t.Fatalf("reading the blocks of %s: %v", acct, err)
	}
	for _, b := range blocks {
		if b.Key == key {
			return b
		}
	}
	t.Fatalf("the grant %s to %s created no block", key, acct)
	return ledgerdb.Block{}
}

// MoveBlockExpiry moves a block's clock, as the database's owner (owner: [OwnerPool], or a
// deployment's [Deployment.OwnerPool]), so that it expires in from now — in the past when in is
// negative — and started two hours ago: a block granted to expire later becomes due when the
// test chooses, which no grant can ask for (a grant's expiry must lie ahead). Only the owner may
// update credit_blocks.
func MoveBlockExpiry(t testing.TB, owner *pgxpool.Pool, blockID int64, in time.Duration) {
	t.Helper()
	tag, err := owner.Exec(context.Background(), `UPDATE credit_blocks
		SET effective_at = now() - interval '2 hours', expires_at = now() + $2::interval WHERE id = $1`, blockID, in)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("moving the expiry of block %d: %v (%d rows)", blockID, err, tag.RowsAffected())
	}
}

// ExpireRow is one expire row of a block, as [ExpireRows] reads it.
type ExpireRow struct {
	ID, Amount int64
	CreatedAt  time.Time
}

// ExpireRows reads a block's expire rows straight from the ledger's table, oldest first.
func ExpireRows(t testing.TB, s *ledgerdb.Store, blockID int64) []ExpireRow {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT id, amount, created_at FROM ledger_entries
		WHERE block_id = $1 AND kind = $2 ORDER BY id`, blockID, string(ledgerdb.KindExpire))
	if err != nil {
		t.Fatalf("reading the expire rows of block %d: %v", blockID, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ExpireRow])
	if err != nil {
		t.Fatalf("reading the expire rows of block %d: %v", blockID, err)
	}
	return out
}
