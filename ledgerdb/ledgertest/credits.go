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
