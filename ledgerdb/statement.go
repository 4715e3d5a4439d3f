package ledgerdb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statement is what an account's money did over a period: the balance it opened with, the sum
// of its rows of each kind, and the balance it closed with. Opening plus every line's Amount is
// Closing, by construction: each is a sum of the same rows, read in one snapshot, so a statement
// of the period after closes on the opening balance of the next.
type Statement struct {
	// AccountID is the account the statement is of.
	AccountID string
	// From and To bound the period: rows written at From or later, and before To.
	From, To time.Time
	// Opening is the balance at From: the sum of every row written before it.
	Opening int64
	// Lines are the period's rows summed by kind, in the order of [EntryKinds]; a kind with no
	// row in the period has no line.
	Lines []StatementLine
	// Closing is the balance at To: the sum of every row written before it.
	Closing int64
	// Final says the statement can no longer change: its period had ended, and no transaction
	// that could still write a row dated inside it was open, when it was read. A row is dated by
	// its transaction's start (created_at is now()), so a money transaction that began before To
	// and commits later lands inside the period after the fact; until none can, the statement is
	// provisional: it says what was written so far.
	Final bool
}

// StatementLine is the rows of one kind in a statement's period.
type StatementLine struct {
	// Kind is what the rows record.
	Kind EntryKind
	// Rows is how many there are.
	Rows int64
	// Amount is their sum, in credits (negative for charges and reclaims).
	Amount int64
}

// EntryKinds are the ledger row kinds in the order a statement lists them: money in, then what
// jobs took and gave back, then corrections and expiries.
func EntryKinds() []EntryKind {
	return []EntryKind{KindGrant, KindCharge, KindRefund, KindReclaim, KindRelease, KindAdjustment, KindExpire}
}

// Statement reads the account's statement for the period [from, to), final or provisional (see
// [Statement.Final]). A period that holds no time
// is [*InvalidInputError]; an unknown account is [ErrUnknownAccount].
func (s *Store) Statement(ctx context.Context, accountID string, from, to time.Time) (Statement, error) {
	if !from.Before(to) {
		return Statement{}, &InvalidInputError{Field: "period", Reason: fmt.Sprintf("runs from %s to %s; its start must be before its end",
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))}
	}
	if _, err := s.Balance(ctx, accountID); err != nil {
		return Statement{}, err
	}
	st := Statement{AccountID: accountID, From: from.UTC(), To: to.UTC()}
	// Whether the period is closed is read before the rows, in its own snapshot: a transaction
	// open at this read is seen here, one that committed before it is in the rows' snapshot
	// taken after, and one that starts after it dates its rows after To. Every money
	// transaction runs as the application role, which sees its own backends' xact_start in
	// pg_stat_activity; any open transaction counts, since one dates its rows by its start even
	// before its first write gives it a transaction ID.
	if err := s.pool.QueryRow(ctx, `
		SELECT $1 <= clock_timestamp() AND NOT EXISTS (
			SELECT FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start < $1)`,
		to).Scan(&st.Final); err != nil {
		return Statement{}, translateError(err)
	}
	// One statement, one snapshot: the opening, the lines and the closing are sums of the same rows.
	byKind := map[EntryKind]StatementLine{}
	rows, err := s.pool.Query(ctx, `
		WITH e AS (SELECT kind, amount, created_at FROM ledger_entries WHERE account_id = $1 AND created_at < $3)
		SELECT 'opening', '', 0::bigint, coalesce(sum(amount) FILTER (WHERE created_at < $2), 0)::bigint FROM e
		UNION ALL
		SELECT 'line', kind, count(*), sum(amount)::bigint FROM e WHERE created_at >= $2 GROUP BY kind
		UNION ALL
		SELECT 'closing', '', 0::bigint, coalesce(sum(amount), 0)::bigint FROM e`, accountID, from, to)
	if err != nil {
		return Statement{}, translateError(err)
	}
	var part, kind string
	var n, amount int64
	_, err = pgx.ForEachRow(rows, []any{&part, &kind, &n, &amount}, func() error {
		switch part {
		case "opening":
			st.Opening = amount
		case "closing":
			st.Closing = amount
		default:
			byKind[EntryKind(kind)] = StatementLine{Kind: EntryKind(kind), Rows: n, Amount: amount}
		}
		return nil
	})
	if err != nil {
		return Statement{}, translateError(err)
	}
	for _, k := range EntryKinds() {
		if line, ok := byKind[k]; ok {
			st.Lines = append(st.Lines, line)
		}
	}
	return st, nil
}
