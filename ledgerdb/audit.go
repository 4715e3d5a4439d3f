package ledgerdb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// AuditReport is the result of replaying one account's ledger.
type AuditReport struct {
	// AccountID is the audited account.
	AccountID string `json:"account_id"`
	// Balance is the account's stored balance.
	Balance int64 `json:"balance"`
	// EntrySum is the sum of the account's ledger rows; the sum-of-rows rule says it equals
	// Balance.
	EntrySum int64 `json:"entry_sum"`
	// Entries is how many ledger rows the account has.
	Entries int `json:"entries"`
	// Jobs is how many jobs the account has.
	Jobs int `json:"jobs"`
	// Violations lists every broken rule, one sentence each; empty when the account is sound.
	Violations []string `json:"violations"`
}

// OK reports whether the audit found nothing wrong.
func (r AuditReport) OK() bool { return len(r.Violations) == 0 }

// Audit replays an account's ledger in one consistent snapshot and checks it against the money
// rules: the balance equals the sum of the rows (the sum-of-rows rule); each row's balance_after
// continues the running sum; each job has at most one charge, refund, reclaim and release, exactly
// those its guard flags say (the reversing-pairs rule); and each job's rows sum to what its state
// and settlement say (the net-effect rule); the credit blocks agree with the rows
// ([AuditReport.replayBlocks]); the revenue report recognises delivered work only
// ([RevenueAudit]); and every automatic top-up request was earned by a spend
// ([AuditReport.replayTopUps]).
func (s *Store) Audit(ctx context.Context, accountID string) (AuditReport, error) {
	if err := ValidateID("account ID", accountID); err != nil {
		return AuditReport{}, err
	}
	report := AuditReport{AccountID: accountID, Violations: []string{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return report.replay(ctx, tx) })
	if err != nil {
		return AuditReport{}, fmt.Errorf("auditing account %q: %w", accountID, translateError(err))
	}
	return report, nil
}

func (r *AuditReport) violation(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

func (r *AuditReport) replay(ctx context.Context, tx pgx.Tx) error {
	err := tx.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = $1`, r.AccountID).Scan(&r.Balance)
	if err != nil {
		if err == pgx.ErrNoRows {
			return fmt.Errorf("account %q: %w", r.AccountID, ErrUnknownAccount)
		}
		return err
	}

	// The rows are grouped by the job key as stored, not the job's own ID, so that a row naming
	// another account's job of the same ID is told apart (and reported below), not added to this
	// account's job.
	rows, err := tx.Query(ctx, `
		SELECT le.id, le.account_id, coalesce(le.job_id, ''), le.kind, le.amount, le.balance_after,
		       coalesce(le.idempotency_key, ''), coalesce(le.memo, ''), le.created_at, `+entryBlockColumns+`
		FROM `+entryFrom+` WHERE le.account_id = $1 ORDER BY le.id`, r.AccountID)
	if err != nil {
		return err
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return err
	}
	r.Entries = len(entries)
	type jobRows struct {
		net   int64
		kinds map[EntryKind]int
	}
	byJob := map[string]*jobRows{}
	for _, e := range entries {
		r.EntrySum += e.Amount
		if e.BalanceAfter != r.EntrySum {
			r.violation("row %d (%s %d): balance_after is %d, the running sum is %d", e.ID, e.Kind, e.Amount, e.BalanceAfter, r.EntrySum)
		}
		if e.JobID == "" {
			continue
		}
		jr := byJob[e.JobID]
		if jr == nil {
			jr = &jobRows{kinds: map[EntryKind]int{}}
			byJob[e.JobID] = jr
		}
		jr.net += e.Amount
		jr.kinds[e.Kind]++
	}
	if r.EntrySum != r.Balance {
		r.violation("balance is %d but the ledger rows sum to %d (rule 6)", r.Balance, r.EntrySum)
	}

	jobRowsOf, err := tx.Query(ctx, `SELECT j FROM jobs j WHERE account_id = $1`, r.AccountID)
	if err != nil {
		return err
	}
	jobs, err := pgx.CollectRows(jobRowsOf, scanJob)
	if err != nil {
		return err
	}
	r.Jobs = len(jobs)
	for _, j := range jobs {
		jr := byJob[j.Key().String()]
		delete(byJob, j.Key().String())
		if jr == nil {
			jr = &jobRows{kinds: map[EntryKind]int{}}
		}
		for kind, want := range j.WantsRows() {
			if jr.kinds[kind] != want {
				r.violation("job %q: %d %s rows, its flags say %d (rule 2)", j.ID, jr.kinds[kind], kind, want)
			}
		}
		if jr.net != j.Net() {
			r.violation("job %q (%s, hold %d): rows sum to %d, its state and settlement say %d (rule 3)", j.ID, j.State, j.Cost, jr.net, j.Net())
		}
	}
	for key := range byJob {
		r.violation("job %q has ledger rows on this account but belongs to another account or none", key)
	}
	if err := r.replayBlocks(ctx, tx); err != nil {
		return err
	}
	revenue, err := readRevenueAudit(ctx, tx, r.AccountID)
	if err != nil {
		return err
	}
	if problem := revenue.Problem(); problem != "" {
		r.violation("%s", problem)
	}
	return r.replayTopUps(ctx, tx)
}
