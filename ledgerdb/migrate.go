package ledgerdb

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

// The schema is applied by jackc/tern: it speaks pgx natively (no database/sql layer beside the
// pool we already have), keeps each numbered migration in one plain .sql file, and holds an
// advisory lock while it migrates, so two processes starting at once cannot both apply a step.
// The tables, types and constraints are numbered migrations; the functions are a tern code
// package (code/install.sql and one file per function), installed after every migration.

//go:embed migrations/*.sql
var migrationFiles embed.FS

//go:embed code/*.sql
var codeFiles embed.FS

// migrationVersionTable records which numbered migrations have been applied.
const migrationVersionTable = "ledger_schema_version"

// Migrate brings the database at connString up to the newest schema, then installs every ledger
// function again from code/. It is safe to run concurrently and repeatedly: applied migrations
// are skipped, and the functions are installed in one transaction under the same advisory lock.
// connString must log in as the schema's owner (migrate_database_url), not as the application
// role, which may change nothing; the role jobbill_app must exist, for the schema grants to it.
func Migrate(ctx context.Context, connString string) error {
	return withMigrator(ctx, connString, func(conn *pgx.Conn, migrator *migrate.Migrator) error {
		if err := migrator.Migrate(ctx); err != nil {
			return fmt.Errorf("migrating: %w", err)
		}
		return installCode(ctx, conn)
	})
}

// MigrateSchemaTo brings the database at connString to the numbered migration version only,
// installing no function: for tests that put the data of an older schema in place, as a deployment
// left it, before Migrate carries it on.
func MigrateSchemaTo(ctx context.Context, connString string, version int32) error {
	return withMigrator(ctx, connString, func(_ *pgx.Conn, migrator *migrate.Migrator) error {
		return migrator.MigrateTo(ctx, version)
	})
}

// withMigrator connects to connString and runs f with a migrator on the connection, the numbered
// migrations loaded.
func withMigrator(ctx context.Context, connString string, f func(*pgx.Conn, *migrate.Migrator) error) error {
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
	return f(conn, migrator)
}

// installCode installs the ledger's functions from code/, in one transaction under the
// migrations' advisory lock, unless the same code is installed already.
func installCode(ctx context.Context, conn *pgx.Conn) error {
	code, err := fs.Sub(codeFiles, "code")
	if err != nil {
		return err
	}
	pkg, err := migrate.LoadCodePackage(code)
	if err != nil {
		return fmt.Errorf("loading the ledger's functions: %w", err)
	}
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	sql, err := pkg.Eval(map[string]any{"schema": pgx.Identifier{schema}.Sanitize()})
	if err != nil {
		return fmt.Errorf("rendering the ledger's functions: %w", err)
	}
	sum := sha256.Sum256([]byte(sql))
	hash := hex.EncodeToString(sum[:])
	var installed bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ledger_code_version WHERE hash = $1)`, hash).Scan(&installed); err != nil {
		return fmt.Errorf("reading the installed functions' version: %w", err)
	}
	if installed {
		return nil
	}
	// The hash is hex, safe to quote.
	sql += fmt.Sprintf(`
INSERT INTO ledger_code_version (hash) VALUES ('%s')
ON CONFLICT (id) DO UPDATE SET hash = excluded.hash, installed_at = now();
`, hash)
	if err := migrate.LockExecTx(ctx, conn, sql); err != nil {
		return fmt.Errorf("installing the ledger's functions: %w", err)
	}
	return nil
}
