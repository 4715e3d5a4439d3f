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
// jobs took and gave back, then corrections.
func EntryKinds() []EntryKind {
	return []EntryKind{KindGrant, KindCharge, KindRefund, KindReclaim, KindRelease, KindAdjustment}
}

// Statement reads the account's statement for the period [from, to). A period that holds no time
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
