package ledgertest

import (
	"context"
	"encoding/csv"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
)

// Now is the database's clock now (clock_timestamp, not the transaction's start): a bound of a
// period that falls between the rows written before it and those written after.
func Now(t testing.TB, s *ledgerdb.Store) time.Time {
	t.Helper()
	var at time.Time
	if err := s.Pool().QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&at); err != nil {
		t.Fatalf("reading the database's clock: %v", err)
	}
	return at.UTC()
}

// ExpireBlock makes the credit block of the account's grant under key expire: it moves the
// block's clock back an hour, as the schema's owner (credit_blocks is not append-only), and runs
// the expiry pass until the block is expired — other tests' due blocks expire with it, as they
// would in the scheduled pass. It answers the block's ID.
func ExpireBlock(t testing.TB, s *ledgerdb.Store, accountID, key string) int64 {
	t.Helper()
	ctx := context.Background()
	var block int64
	if err := s.Pool().QueryRow(ctx, `SELECT block_id FROM ledger_entries WHERE account_id = $1 AND idempotency_key = $2`,
		accountID, key).Scan(&block); err != nil {
		t.Fatalf("the block of %s's grant %s: %v", accountID, key, err)
	}
	if _, err := OwnerPool(t).Exec(ctx, `UPDATE credit_blocks SET effective_at = now() - interval '2 hours',
		expires_at = now() - interval '1 hour' WHERE id = $1`, block); err != nil {
		t.Fatalf("moving block %d's clock back: %v", block, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, _, err := s.ExpireBlocks(ctx, ledgerdb.MaxExpiriesPerCall); err != nil {
			t.Fatalf("expiring blocks: %v", err)
		}
		var expired bool
		if err := s.Pool().QueryRow(ctx, `SELECT expired_at IS NOT NULL FROM credit_blocks WHERE id = $1`, block).Scan(&expired); err != nil {
			t.Fatalf("reading block %d: %v", block, err)
		}
		if expired {
			return block
		}
		if time.Now().After(deadline) {
			t.Fatalf("block %d did not expire within a minute", block)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StatementCSV reads a statement as [ledgerdb.WriteStatementCSV] writes it: its records after the
// header, which must be [ledgerdb.StatementCSVHeader], and its opening balance, the sum of its
// lines' credits and its closing balance.
func StatementCSV(t testing.TB, body string) (records [][]string, opening, lines, closing int64) {
	t.Helper()
	all, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(all) == 0 || strings.Join(all[0], ",") != strings.Join(ledgerdb.StatementCSVHeader, ",") {
		t.Fatalf("not a statement's CSV (%v):\n%s", err, body)
	}
	for _, rec := range all[1:] {
		if rec[0] == "status" {
			continue
		}
		n, err := strconv.ParseInt(rec[3], 10, 64)
		if err != nil {
			t.Fatalf("a statement's credits %q: %v", rec[3], err)
		}
		switch rec[0] {
		case "opening_balance":
			opening = n
		case "closing_balance":
			closing = n
		default:
			lines += n
		}
	}
	return all[1:], opening, lines, closing
}
