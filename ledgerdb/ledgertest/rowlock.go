package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobbill/jobbill/ledgerdb"
)

// BusyRow holds a ledger row busy from a connection of its own, as an operator's psql session
// would (SELECT … FOR NO KEY UPDATE, in a transaction left open): every transaction that changes
// the row waits behind it until [BusyRow.Release]. Tests wait on the waiters Postgres reports
// ([BusyRow.AwaitWaiter], [Waiters]), never on a clock.
type BusyRow struct {
	t    testing.TB
	conn *pgx.Conn
	tx   pgx.Tx
	// PID is the holding connection's backend.
	PID int
}

// HoldAccount holds the account's row busy until Release (or the test's end): a charge to the
// account waits, holding its job's row, while placeholders are still written (their foreign-key
// check takes a lock this one does not conflict with).
func HoldAccount(t testing.TB, accountID string) *BusyRow {
	t.Helper()
	return hold(t, "accounts", accountID)
}

// HoldJob holds the job's row busy until Release (or the test's end): every transition of the job
// waits, in the order it came.
func HoldJob(t testing.TB, key ledgerdb.JobKey) *BusyRow {
	t.Helper()
	return hold(t, "jobs", key.String())
}

// hold locks the row of table whose id is id. It connects as the schema's owner: row locks need a
// privilege the application role does not have.
func hold(t testing.TB, table, id string) *BusyRow {
	t.Helper()
	Store(t) // migrated first
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, MigrateDatabaseURL())
	if err != nil {
		t.Fatalf("connecting to hold a row of %s busy: %v", table, err)
	}
	h := &BusyRow{t: t, conn: conn}
	t.Cleanup(h.Release)
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&h.PID); err != nil {
		t.Fatalf("reading the holder's backend: %v", err)
	}
	if h.tx, err = conn.Begin(ctx); err != nil {
		t.Fatalf("beginning the holder's transaction: %v", err)
	}
	// The table is one of the two above, never a caller's text.
	tag, err := h.tx.Exec(ctx, `SELECT 1 FROM `+table+` WHERE id = $1 FOR NO KEY UPDATE`, id)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("locking %s row %s (%d rows): %v", table, id, tag.RowsAffected(), err)
	}
	return h
}

// AwaitWaiter waits, up to limit, until a backend waits for the held row, and answers its PID: the
// first transaction that tried to change the row.
func (h *BusyRow) AwaitWaiter(limit time.Duration) int {
	h.t.Helper()
	return AwaitWaiter(h.t, h.PID, limit)
}

// AwaitWaiter waits, up to limit, until a backend waits for a lock that the backend pid holds, and
// answers its PID; it fails the test when none does.
func AwaitWaiter(t testing.TB, pid int, limit time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if waiters := Waiters(t, pid); len(waiters) > 0 {
			return waiters[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing waited for a lock of backend %d within %s", pid, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ReleaseWhenHeard releases the held row once an operation running on its own goroutine has been
// heard of: it answered on answered, or a backend waits behind the backend behind (the
// operation's next step queued behind a transaction that waits for the row). It answers what the
// operation answered, waiting for it after the release if need be, and fails the test when
// neither happens within limit.
func ReleaseWhenHeard[T any](t testing.TB, h *BusyRow, behind int, answered <-chan T, limit time.Duration) T {
	t.Helper()
	deadline := time.Now().Add(limit)
	for len(Waiters(t, behind)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("within %s, the operation neither answered nor waited behind backend %d", limit, behind)
		}
		select {
		case got := <-answered:
			h.Release()
			return got
		case <-time.After(20 * time.Millisecond):
		}
	}
	h.Release()
	return <-answered
}

// Release ends the holder's transaction (nothing was written) and its connection: the waiters go
// on. Releasing twice is harmless.
func (h *BusyRow) Release() {
	if h.conn == nil {
		return
	}
	ctx := context.Background()
	if h.tx != nil {
		_ = h.tx.Rollback(ctx)
	}
	_ = h.conn.Close(ctx)
	h.conn, h.tx = nil, nil
}

// Waiters are the backends of the test database waiting for a lock that the backend pid holds.
func Waiters(t testing.TB, pid int) []int {
	t.Helper()
	rows, err := OwnerPool(t).Query(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)) ORDER BY pid`, pid)
	if err != nil {
		t.Fatalf("reading the waiters behind backend %d: %v", pid, err)
	}
	waiters, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("reading the waiters behind backend %d: %v", pid, err)
	}
	return waiters
}
