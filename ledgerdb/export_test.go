package ledgerdb

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

// AuditThrough replays an account's ledger as [Store.Audit] does, but through tx: it sees the
// transaction's own uncommitted writes, so that a test can break a money rule inside a
// transaction it rolls back and watch the audit catch it.
func AuditThrough(ctx context.Context, tx pgx.Tx, accountID string) (AuditReport, error) {
	report := AuditReport{AccountID: accountID, Violations: []string{}}
	err := report.replay(ctx, tx)
	return report, err
}

// MigrateTo applies the numbered migrations up to version on conn, in its current schema, and
// installs no function: a test can then write rows as an older schema held them and watch a later
// migration carry them forward.
func MigrateTo(ctx context.Context, conn *pgx.Conn, version int32) error {
	migrator, err := migrate.NewMigrator(ctx, conn, migrationVersionTable)
	if err != nil {
		return err
	}
	migrations, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	if err := migrator.LoadMigrations(migrations); err != nil {
		return err
	}
	return migrator.MigrateTo(ctx, version)
}
