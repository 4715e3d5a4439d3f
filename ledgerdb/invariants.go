package ledgerdb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Read helpers for the whole-system invariant checker (package invariants): one consistent
// snapshot of the ledger's totals, per account and per job, that the checker compares against
// the money rules and against Temporal. [Store.Audit] replays one account row by row; this reads
// every account and job in scope in two statements, so that a check of thousands of jobs stays cheap.

// SnapshotScope narrows a [LedgerSnapshot]. The zero value reads the whole ledger.
type SnapshotScope struct {
	// AccountID, when set, keeps only this account and its jobs; an account that does not exist
	// is [ErrUnknownAccount].
	AccountID string
	// JobIDPrefix, when set, keeps only jobs whose ID starts with it and, unless AccountID is
	// set, only the accounts that own such a job (tests in a shared database name their jobs with
	// a prefix of their own).
	JobIDPrefix string
}

// AccountTotals is an account's stored balance beside what its ledger rows say (the sum-of-rows
// rule).
type AccountTotals struct {
	// AccountID is the account.
	AccountID string
	// Balance is the account's stored balance.
	Balance int64
	// EntrySum is the sum of the account's ledger rows; the sum-of-rows rule says it equals
	// Balance.
	EntrySum int64
	// Entries is how many ledger rows the account has.
	Entries int
	// ChainBreaks is how many of the account's rows have a balance_after that differs from the
	// running sum of the rows up to them: each was not "balance = sum of rows" when it committed.
	ChainBreaks int
	// FirstChainBreak is the ID of the first such row; 0 when there is none.
	FirstChainBreak int64
	// AwaitingReclaim is the account's stored sum of refunds that a late result may still reclaim,
	// which its lower exposure bound rests on (MaxBalance).
	AwaitingReclaim int64
	// RefundedCosts is the sum of the costs of the account's refunded jobs, deleted ones included
	// (a late result still reclaims their refund): what AwaitingReclaim must equal.
	RefundedCosts int64
	// BlocksHeld is what the account's credit blocks hold, and Debt what its rows drew beyond
	// them: Balance must be BlocksHeld − Debt, and Debt never negative.
	BlocksHeld, Debt int64
	// BlocksOff counts the account's blocks that do not hold what their moves add up to.
	BlocksOff int
	// UnendedHeld is what the account's blocks that have not ended hold — spendable, or not
	// started yet (a block ends when it is void, marked expired or past its expiry). While Debt is
	// above zero it must be 0: a debt is paid by the first credits that reach the account.
	UnendedHeld int64
	// Revenue is what the revenue report recognises of the account beside what its delivered work
	// accounts for: [RevenueAudit.Problem] says whether revenue was recognised for work not
	// delivered.
	Revenue RevenueAudit
	// TopUpProblems says, one sentence each, which of the account's automatic top-up requests no
	// spend earned (ledger_topup_audit, as [Store.Audit] reports them): empty when every one was.
	TopUpProblems []string
}

// JobTotals is a job's row beside the totals of its ledger rows (the reversing-pairs and net-effect
// rules).
type JobTotals struct {
	// Job is the job's row.
	Job Job
	// Charges, Refunds, Reclaims and Releases count the job's rows of each kind; the
	// reversing-pairs rule allows at most one of each, exactly those the job's guard flags record
	// ([Job.WantsRows]).
	Charges, Refunds, Reclaims, Releases int
	// EntrySum is the sum of the job's rows; the net-effect rule says it equals Job.Net().
	EntrySum int64
	// ForeignEntries counts the job's rows booked on an account other than the job's own.
	ForeignEntries int
	// Alarms are the job's alarms, "step: message" each: ledger steps the database refused for good.
	Alarms []string
	// UnappliedResults counts results recorded for the job that no workflow has taken yet.
	UnappliedResults int
	// OldestUnappliedResult is when the oldest of them was recorded; nil when there is none.
	OldestUnappliedResult *time.Time
	// LastAppliedResult is when a result recorded for the job was last taken (by its workflow, the
	// fallback, or as nothing left to bill); nil when none was. A job whose refund still awaits a
	// reclaim long after a result was taken lost that result.
	LastAppliedResult *time.Time
}

// LedgerSnapshot is the ledger's totals in scope, read in one repeatable-read transaction so that
// the accounts and the jobs agree with each other.
type LedgerSnapshot struct {
	// AsOf is the database's clock when the snapshot was taken; ages of jobs are measured from it,
	// so that the checker's own clock does not matter.
	AsOf time.Time
	// Accounts are the accounts in scope, ordered by ID.
	Accounts []AccountTotals
	// Jobs are the jobs in scope, ordered by ID.
	Jobs []JobTotals
}

// Querier is what [ReadLedgerSnapshot] reads through: a pgx.Tx, a *pgx.Conn or a *pgxpool.Pool.
type Querier interface {
	// Query runs a statement that returns rows.
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	// QueryRow runs a statement that returns at most one row.
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// LedgerSnapshot reads the totals of every account and job in scope in one read-only,
// repeatable-read transaction.
func (s *Store) LedgerSnapshot(ctx context.Context, scope SnapshotScope) (LedgerSnapshot, error) {
	if err := scope.validate(); err != nil {
		return LedgerSnapshot{}, err
	}
	var snap LedgerSnapshot
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var err error
			snap, err = ReadLedgerSnapshot(ctx, tx, scope)
			return err
		})
	if err != nil {
		return LedgerSnapshot{}, fmt.Errorf("reading the ledger snapshot: %w", translateError(err))
	}
	return snap, nil
}

// ReadLedgerSnapshot reads the snapshot through q. Through a transaction, it sees that
// transaction's own uncommitted writes, which lets a test break a rule inside a transaction it
// rolls back and watch the checker catch it. Pass a repeatable-read transaction for a consistent
// snapshot; [Store.LedgerSnapshot] does.
func ReadLedgerSnapshot(ctx context.Context, q Querier, scope SnapshotScope) (LedgerSnapshot, error) {
	if err := scope.validate(); err != nil {
		return LedgerSnapshot{}, err
	}
	var snap LedgerSnapshot
	if err := q.QueryRow(ctx, `SELECT now()`).Scan(&snap.AsOf); err != nil {
		return LedgerSnapshot{}, err
	}

	// ledger_snapshot_accounts and ledger_snapshot_jobs (ledgerdb/code/audit_snapshot.sql) say
	// what each total is.
	rows, err := q.Query(ctx, `SELECT * FROM ledger_snapshot_accounts($1, $2)`, scope.AccountID, scope.JobIDPrefix)
	if err != nil {
		return LedgerSnapshot{}, err
	}
	snap.Accounts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (AccountTotals, error) {
		var (
			a                     AccountTotals
			recognised, delivered string
		)
		err := row.Scan(&a.AccountID, &a.Balance, &a.EntrySum, &a.Entries, &a.ChainBreaks, &a.FirstChainBreak,
			&a.AwaitingReclaim, &a.RefundedCosts, &a.BlocksHeld, &a.Debt, &a.BlocksOff, &a.UnendedHeld,
			&a.Revenue.Recognised.Credits, &recognised, &a.Revenue.Delivered.Credits, &delivered, &a.Revenue.UndeliveredJobs, &a.TopUpProblems)
		a.Revenue.Recognised.Amount, a.Revenue.Delivered.Amount = trimDecimal(recognised), trimDecimal(delivered)
		return a, err
	})
	if err != nil {
		return LedgerSnapshot{}, err
	}
	if scope.AccountID != "" && len(snap.Accounts) == 0 {
		// Checking an account that does not exist would otherwise pass, checking nothing.
		return LedgerSnapshot{}, fmt.Errorf("account %q: %w", scope.AccountID, ErrUnknownAccount)
	}

	rows, err = q.Query(ctx, `SELECT * FROM ledger_snapshot_jobs($1, $2)`, scope.AccountID, scope.JobIDPrefix)
	if err != nil {
		return LedgerSnapshot{}, err
	}
	snap.Jobs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (JobTotals, error) {
		var (
			t   JobTotals
			job *jobRow
		)
		err := row.Scan(&job, &t.Charges, &t.Refunds, &t.Reclaims, &t.Releases, &t.EntrySum, &t.ForeignEntries,
			&t.Alarms, &t.UnappliedResults, &t.OldestUnappliedResult, &t.LastAppliedResult)
		t.Job = job.job()
		return t, err
	})
	if err != nil {
		return LedgerSnapshot{}, err
	}
	return snap, nil
}

func (s SnapshotScope) validate() error {
	if s.AccountID != "" {
		if err := ValidateID("account ID", s.AccountID); err != nil {
			return err
		}
	}
	if s.JobIDPrefix != "" {
		// A prefix of an ID has the shape of an ID, which also keeps it safe to quote in a
		// Temporal visibility query.
		return ValidateID("job ID prefix", s.JobIDPrefix)
	}
	return nil
}
