package ledgerdb

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Statement is what an account's money did over a period: the balance it opened with, the sum
// of its rows of each kind (grants by their block's category, charges by their job's kind), and
// the balance it closed with. Opening plus every line's Amount is
// Closing, by construction: each is a sum of the same rows, read in one snapshot, so a statement
// of the period after closes on the opening balance of the next.
type Statement struct {
	// AccountID is the account the statement is of.
	AccountID string
	// From and To bound the period: rows written at From or later, and before To.
	From, To time.Time
	// Opening is the balance at From: the sum of every row written before it.
	Opening int64
	// Lines are the period's rows summed by kind, in the order of [EntryKinds]: grants one line
	// per category (paid, then promotional), charges one line per job kind (in the kinds'
	// order), every other kind one line. A kind with no row in the period has no line.
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
	// Category is the category of the blocks a grant line's rows made; empty on other lines. A
	// grant written before credit blocks began made none: it counts as paid, as its credits do.
	Category BlockCategory
	// JobKind is the kind of the jobs a charge line's rows charged ("render-4k"); empty on other
	// lines.
	JobKind string
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

// ValidatePeriod checks a period [from, to) of a statement or a report: it must hold some time.
// A period that does not is [*InvalidInputError] on the field "period".
func ValidatePeriod(from, to time.Time) error {
	if !from.Before(to) {
		return &InvalidInputError{Field: "period", Reason: fmt.Sprintf("runs from %s to %s; its start must be before its end",
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))}
	}
	return nil
}

// ParseInstant reads a bound of a period as every door takes it: an RFC 3339 time, or a date
// (2026-01-02), which is that day's midnight UTC. Anything else is [*InvalidInputError] on field.
func ParseInstant(field, value string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, value); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, value); err == nil {
		return t, nil
	}
	if len(value) > 40 {
		value = value[:40] + "…"
	}
	return time.Time{}, &InvalidInputError{Field: field, Reason: fmt.Sprintf("is %q; it must be an RFC 3339 time or a date such as 2026-01-02", value)}
}

// Statement reads the account's statement for the period [from, to), final or provisional (see
// [Statement.Final]), through the ledger's function ledger_statement
// (ledgerdb/code/reports_statement.sql, which states every rule). A period that holds no time is
// [*InvalidInputError]; an unknown account is [ErrUnknownAccount].
func (s *Store) Statement(ctx context.Context, accountID string, from, to time.Time) (Statement, error) {
	if err := ValidatePeriod(from, to); err != nil {
		return Statement{}, err
	}
	if _, err := s.Balance(ctx, accountID); err != nil {
		return Statement{}, err
	}
	rows, err := s.pool.Query(ctx, `SELECT * FROM ledger_statement($1, $2, $3)`, accountID, from, to)
	if err != nil {
		return Statement{}, translateError(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowToStructByName[statementRow])
	if err != nil {
		return Statement{}, translateError(err)
	}
	st := Statement{AccountID: accountID, From: from.UTC(), To: to.UTC()}
	for _, row := range lines {
		st.Final = row.Final
		switch row.Line {
		case "opening":
			st.Opening = row.Credits
		case "closing":
			st.Closing = row.Credits
		default:
			st.Lines = append(st.Lines, StatementLine{Kind: EntryKind(row.Kind.String), Category: BlockCategory(row.Category.String),
				JobKind: row.JobKind.String, Rows: row.Rows.Int64, Amount: row.Credits})
		}
	}
	return st, nil
}

// statementRow is a row of ledger_statement, scanned by its columns' names: one line of the
// statement, in the order the statement lists them.
type statementRow struct {
	Line     string      `db:"line"`
	Kind     pgtype.Text `db:"kind"`
	Category pgtype.Text `db:"category"`
	JobKind  pgtype.Text `db:"job_kind"`
	Rows     pgtype.Int8 `db:"rows"`
	Credits  int64       `db:"credits"`
	Final    bool        `db:"final"`
}

// StatementCSVHeader is the first record of a statement's CSV.
var StatementCSVHeader = []string{"line", "kind", "rows", "credits"}

// WriteStatementCSV writes a statement as CSV, the one form in which every door hands it out: the
// header ([StatementCSVHeader]), whether it is final or provisional, the opening balance, one
// record per line and the closing balance, so that the opening plus the lines' credits is the
// closing. A grant line's kind names its category ("grant:paid") and a charge line's its job
// kind ("charge:render-4k").
func WriteStatementCSV(w io.Writer, st Statement) error {
	out := csv.NewWriter(w)
	_ = out.Write(StatementCSVHeader)
	_ = out.Write([]string{"status", st.Status(), "", ""})
	_ = out.Write([]string{"opening_balance", "", "", strconv.FormatInt(st.Opening, 10)})
	for _, line := range st.Lines {
		_ = out.Write([]string{"rows", line.Label(), strconv.FormatInt(line.Rows, 10), strconv.FormatInt(line.Amount, 10)})
	}
	_ = out.Write([]string{"closing_balance", "", "", strconv.FormatInt(st.Closing, 10)})
	out.Flush()
	return out.Error()
}

// Status is "final" for a statement that can no longer change, "provisional" for one that may
// (see [Statement.Final]).
func (st Statement) Status() string {
	if st.Final {
		return "final"
	}
	return "provisional"
}

// Label names the line as a statement's CSV does: its kind, and after a colon its grant's
// category or its charge's job kind.
func (l StatementLine) Label() string {
	switch {
	case l.Category != "":
		return string(l.Kind) + ":" + string(l.Category)
	case l.JobKind != "":
		return string(l.Kind) + ":" + l.JobKind
	}
	return string(l.Kind)
}
