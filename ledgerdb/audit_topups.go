package ledgerdb

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// replayTopUps checks the account's automatic top-up requests against its rules, in the audit's
// snapshot (ledger_topup_audit, which the invariant checker's snapshot reads too): a request asks
// only for a spend — a charge, a reclaim, a negative adjustment, an expiry by the expiry pass —
// made while the account had a rule, and a month's requests never ask past the cap they were
// asked within. Each request that breaks it is a violation.
func (r *AuditReport) replayTopUps(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT problem FROM ledger_topup_audit($1) ORDER BY event_seq`, r.AccountID)
	if err != nil {
		return err
	}
	problems, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, p := range problems {
		r.violation("%s", p)
	}
	return nil
}
