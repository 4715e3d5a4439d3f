package ledgertest

import (
	"context"
	"fmt"
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

// PassBlockExpiry moves a block's expiry back, as the schema's owner (credit_blocks is the ledger
// functions' to write), to just after the last row that spent from it — so that those rows stay
// inside the block's time, as they were when they were written (the audit checks that no block is
// spent after its expiry) — or to just after its start when nothing did. A block that expired
// already is left as it is. The expiry pass has not run: the block is due.
func PassBlockExpiry(t testing.TB, blockID int64) {
	t.Helper()
	_, err := OwnerPool(t).Exec(context.Background(), `UPDATE credit_blocks b
		SET expires_at = greatest(b.effective_at, (
			SELECT max(e.created_at) FROM ledger_block_moves m JOIN ledger_entries e ON e.id = m.entry_id
			WHERE m.block_id = b.id)) + interval '1 microsecond'
		WHERE b.id = $1 AND (b.expires_at IS NULL OR b.expires_at > now())`, blockID)
	if err != nil {
		t.Fatalf("moving the expiry of block %d: %v", blockID, err)
	}
}

// ExpireBlock makes a block's expiry pass ([PassBlockExpiry]) and runs the expiry until the block
// is expired. The expiry expires every due block of the database, other tests' too, as the
// scheduled pass would.
func ExpireBlock(t testing.TB, s *ledgerdb.Store, blockID int64) {
	t.Helper()
	ctx := context.Background()
	PassBlockExpiry(t, blockID)
	for more := true; more; {
		var err error
		if _, more, err = s.ExpireBlocks(ctx, ledgerdb.MaxExpiriesPerCall); err != nil {
			t.Fatalf("expiring blocks: %v", err)
		}
	}
	var expired bool
	if err := s.Pool().QueryRow(ctx, `SELECT expired_at IS NOT NULL FROM credit_blocks WHERE id = $1`, blockID).Scan(&expired); err != nil || !expired {
		t.Fatalf("block %d not expired (%v)", blockID, err)
	}
}

// ExpireGrant expires the block the account's grant under key made ([ExpireBlock]) and answers
// the block's ID.
func ExpireGrant(t testing.TB, s *ledgerdb.Store, accountID, key string) int64 {
	t.Helper()
	var block int64
	if err := s.Pool().QueryRow(context.Background(), `SELECT block_id FROM ledger_entries WHERE account_id = $1 AND idempotency_key = $2`,
		accountID, key).Scan(&block); err != nil {
		t.Fatalf("the block of %s's grant %s: %v", accountID, key, err)
	}
	ExpireBlock(t, s, block)
	return block
}

// Promotional grants the account a promotional block of amount credits that expires in a day,
// under key, and answers the block (ExpireBlock expires it at once).
func Promotional(t testing.TB, s *ledgerdb.Store, acct, key string, amount int64) int64 {
	t.Helper()
	tomorrow := time.Now().Add(24 * time.Hour)
	g, err := s.Grant(context.Background(), ledgerdb.Credit{AccountID: acct, Amount: amount, Key: key,
		Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, ExpiresAt: &tomorrow}})
	if err != nil {
		t.Fatalf("granting %d promotional credits to %s: %v", amount, acct, err)
	}
	return BlockOf(t, s, g)
}

// BlockOf answers the credit block a grant made.
func BlockOf(t testing.TB, s *ledgerdb.Store, grant ledgerdb.Posting) int64 {
	t.Helper()
	var id int64
	if err := s.Pool().QueryRow(context.Background(), `SELECT block_id FROM ledger_entries WHERE id = $1`, grant.EntryID).Scan(&id); err != nil {
		t.Fatalf("reading the block of grant row %d: %v", grant.EntryID, err)
	}
	return id
}

// Block is the account's credit block id as it stands.
func Block(t testing.TB, s *ledgerdb.Store, acct string, id int64) ledgerdb.Block {
	t.Helper()
	return findBlock(t, s, acct, fmt.Sprintf("block %d", id), func(b ledgerdb.Block) bool { return b.ID == id })
}

// BlockOfKey is the account's credit block of the grant posted under key, as it stands.
func BlockOfKey(t testing.TB, s *ledgerdb.Store, acct, key string) ledgerdb.Block {
	t.Helper()
	return findBlock(t, s, acct, "block of key "+key, func(b ledgerdb.Block) bool { return b.Key == key })
}

// findBlock answers the account's first block that match accepts, and fails the test, naming
// what it looked for, when the account has none.
func findBlock(t testing.TB, s *ledgerdb.Store, acct, what string, match func(ledgerdb.Block) bool) ledgerdb.Block {
	t.Helper()
	blocks, err := s.Blocks(context.Background(), acct)
	if err != nil {
		t.Fatalf("reading the blocks of %s: %v", acct, err)
	}
	for _, b := range blocks {
		if match(b) {
			return b
		}
	}
	t.Fatalf("account %s has no %s", acct, what)
	return ledgerdb.Block{}
}

// ExpiredRefund is the story of a refund that returned credits to a block that had expired
// (RefundIntoExpiredBlock).
type ExpiredRefund struct {
	// Account is the account: granted 100 paid credits and 15 promotional ones.
	Account string
	// Job is the 40-credit job, charged 15 promotional and 25 paid credits, then refunded (for a
	// timeout): its 25 paid credits stay the account's, its 15 promotional ones expire at once.
	Job ledgerdb.JobKey
	// Kept is a 10-credit job charged after it and refunded (the work failed): all paid credits,
	// none expire.
	Kept ledgerdb.JobKey
	// Block is the promotional block, expired between the charges and the refunds (holding
	// nothing then, it was marked expired with no row).
	Block int64
	// Refund is the job's refund.
	Refund ledgerdb.Transition
}

// RefundIntoExpiredBlock writes the story ExpiredRefund tells, on a new account.
func RefundIntoExpiredBlock(t testing.TB, s *ledgerdb.Store) ExpiredRefund {
	t.Helper()
	ctx := context.Background()
	x := ExpiredRefund{Account: Account(t, s, 100)}
	x.Block = Promotional(t, s, x.Account, "promo", 15)
	x.Job = Charged(t, s, x.Account, ID(t, "job"), 40, "s3://in/1").Job.Key()
	x.Kept = Charged(t, s, x.Account, ID(t, "kept"), 10, "s3://in/2").Job.Key()
	ExpireBlock(t, s, x.Block)
	var err error
	if x.Refund, err = s.Refund(ctx, x.Job, ledgerdb.ReasonTimedOut, "timed out on gpu-7.internal", 3); err != nil || x.Refund.Outcome != ledgerdb.Applied {
		t.Fatalf("refunding %s: %v (%s)", x.Job, err, x.Refund.Outcome)
	}
	if tr, err := s.Refund(ctx, x.Kept, ledgerdb.ReasonGPUFailed, "", 1); err != nil || tr.Outcome != ledgerdb.Applied {
		t.Fatalf("refunding %s: %v (%s)", x.Kept, err, tr.Outcome)
	}
	RequireBalance(t, s, x.Account, 100)
	return x
}
