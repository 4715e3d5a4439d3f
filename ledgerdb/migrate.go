package ledgerdb

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

// The schema is applied by jackc/tern: it speaks pgx natively (no database/sql layer beside the
// pool we already have), keeps each numbered migration in one plain .sql file, and holds an
// advisory lock while it migrates, so two processes starting at once cannot both apply a step.

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationVersionTable records which numbered migrations have been applied.
const migrationVersionTable = "ledger_schema_version"

// Migrate brings the database at connString up to the newest schema. It is safe to run
// concurrently and repeatedly: applied migrations are skipped. connString must log in as the
// schema's owner (migrate_database_url), not as the application role, which may change nothing;
// the role jobbill_app must exist, for migration 005 grants to it.
func Migrate(ctx context.Context, connString string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return fmt.Errorf("connecting to migrate: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	migrator, err := migrate.NewMigrator(ctx, conn, migrationVersionTable)
	if err != nil {
		return fmt.Errorf("preparing migrations: %w", err)
	}
	migrations, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	if err := migrator.LoadMigrations(migrations); err != nil {
		return fmt.Errorf("loading migrations: %w", err)
	}
	if err := migrator.Migrate(ctx); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	return nil
}
