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
// every account and job in scope in two queries, so that a check of thousands of jobs stays cheap.

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

	// The running sum is a window over each account's rows in commit order (ID order), the same
	// replay Audit does row by row.
	rows, err := q.Query(ctx, `
		WITH scoped AS (
			SELECT a.id, a.balance, a.awaiting_reclaim, r.recognised_credits, r.recognised_amount,
			       r.delivered_credits, r.delivered_amount, r.undelivered_jobs
			FROM accounts a CROSS JOIN LATERAL ledger_revenue_audit(a.id) r
			WHERE CASE WHEN $1 <> '' THEN a.id = $1
			           WHEN $2 <> '' THEN EXISTS (SELECT 1 FROM jobs j WHERE j.account_id = a.id AND starts_with(j.id, a.id || '/' || $2))
			           ELSE true END
		), chained AS (
			SELECT e.account_id, e.id, e.amount, e.balance_after,
			       sum(e.amount) OVER (PARTITION BY e.account_id ORDER BY e.id) AS running
			FROM ledger_entries e JOIN scoped s ON s.id = e.account_id
		)
		SELECT s.id, s.balance, coalesce(sum(c.amount), 0)::bigint, count(c.id),
		       count(c.id) FILTER (WHERE c.balance_after <> c.running),
		       coalesce(min(c.id) FILTER (WHERE c.balance_after <> c.running), 0),
		       s.awaiting_reclaim,
		       (SELECT coalesce(sum(j.cost), 0)::bigint FROM jobs j WHERE j.account_id = s.id AND j.is_refunded AND NOT j.is_reclaimed),
		       (SELECT coalesce(sum(b.remaining), 0)::bigint FROM credit_blocks b WHERE b.account_id = s.id),
		       (SELECT coalesce(-sum(m.amount), 0)::bigint FROM ledger_block_moves m WHERE m.account_id = s.id AND m.block_id IS NULL),
		       (SELECT count(*) FROM credit_blocks b WHERE b.account_id = s.id
		           AND b.remaining <> (SELECT coalesce(sum(m.amount), 0) FROM ledger_block_moves m WHERE m.block_id = b.id)),
		       (SELECT coalesce(sum(b.remaining), 0)::bigint FROM credit_blocks b WHERE b.account_id = s.id
		           AND b.remaining > 0 AND b.status <> 'void' AND b.expired_at IS NULL
		           AND (b.expires_at IS NULL OR b.expires_at > now())),
		       s.recognised_credits, s.recognised_amount, s.delivered_credits, s.delivered_amount, s.undelivered_jobs,
		       (SELECT coalesce(array_agg(t.problem ORDER BY t.event_seq), '{}') FROM ledger_topup_audit(s.id) t)
		FROM scoped s LEFT JOIN chained c ON c.account_id = s.id
		GROUP BY s.id, s.balance, s.awaiting_reclaim, s.recognised_credits, s.recognised_amount, s.delivered_credits,
		         s.delivered_amount, s.undelivered_jobs
		ORDER BY s.id`, scope.AccountID, scope.JobIDPrefix)
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

	rows, err = q.Query(ctx, `
		SELECT j,
		       count(e.id) FILTER (WHERE e.kind = 'charge'),
		       count(e.id) FILTER (WHERE e.kind = 'refund'),
		       count(e.id) FILTER (WHERE e.kind = 'reclaim'),
		       count(e.id) FILTER (WHERE e.kind = 'release'),
		       coalesce(sum(e.amount), 0)::bigint,
		       count(e.id) FILTER (WHERE e.account_id <> j.account_id),
		       (SELECT coalesce(array_agg(a.step || ': ' || a.message ORDER BY a.id), '{}') FROM ledger_alarms a WHERE a.job_id = j.id),
		       (SELECT count(*) FROM result_reports r WHERE r.job_id = j.id AND r.applied_at IS NULL),
		       (SELECT min(r.received_at) FROM result_reports r WHERE r.job_id = j.id AND r.applied_at IS NULL),
		       (SELECT max(r.applied_at) FROM result_reports r WHERE r.job_id = j.id)
		FROM jobs j LEFT JOIN ledger_entries e ON e.job_id = j.id
		WHERE ($1 = '' OR j.account_id = $1) AND ($2 = '' OR starts_with(j.id, j.account_id || '/' || $2))
		GROUP BY j.id
		ORDER BY j.id`, scope.AccountID, scope.JobIDPrefix)
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
