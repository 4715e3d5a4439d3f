package ledgerdb

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// AuditThrough replays an account's ledger as [Store.Audit] does, but through tx: it sees the
// transaction's own uncommitted writes, so that a test can break a money rule inside a
// transaction it rolls back and watch the audit catch it.
func AuditThrough(ctx context.Context, tx pgx.Tx, accountID string) (AuditReport, error) {
	report := AuditReport{AccountID: accountID, Violations: []string{}}
	err := report.replay(ctx, tx)
	return report, err
}
