package ledgerdb

import (
	"context"
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

// The external tests (package ledgerdb_test) reach inside the ledger through the two helpers
// below: the migrations and the audit's replay, run on a connection or transaction of the test's.

// AuditThrough replays an account's ledger as [Store.Audit] does, but through tx: it sees the
// transaction's own uncommitted writes, so that a test can break a money rule inside a
// transaction it rolls back and watch the audit catch it.
func AuditThrough(ctx context.Context, tx pgx.Tx, accountID string) (AuditReport, error) {
	report := AuditReport{AccountID: accountID, Violations: []string{}}
	err := report.replay(ctx, tx)
	return report, err
}

// RevenueThrough reads the revenue report as [Store.Revenue] does, but through tx: it sees the
// transaction's own uncommitted writes, so that a test can build moves no function writes yet inside
// a transaction it rolls back and read the report of them.
func RevenueThrough(ctx context.Context, tx pgx.Tx, from, to time.Time, accountID string) (Revenue, error) {
	return readRevenue(ctx, tx, from, to, accountID)
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

// LatestMigration is the number of the last migration: [MigrateTo] it to bring a schema up to date.
func LatestMigration(t *testing.T) int32 {
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	return int32(len(files))
}

// InstallCode installs the ledger's functions on conn, in its current schema, as [Migrate] does
// after the migrations: a test that migrated a schema of its own with [MigrateTo] can then call
// them there.
func InstallCode(ctx context.Context, conn *pgx.Conn) error {
	if err := installCode(ctx, conn); err != nil {
		return err
	}
	return registerTypes(ctx, conn) // the audit reads the schema's own row types
}

// TestInstallIncludesEveryFunctionFile keeps code/ the whole set of the ledger's functions:
// install.sql includes each function file exactly once, so that a file added without being
// included (its function never installed) or included twice cannot slip through review.
func TestInstallIncludesEveryFunctionFile(t *testing.T) {
	install, err := fs.ReadFile(codeFiles, "code/install.sql")
	if err != nil {
		t.Fatal(err)
	}
	included := map[string]int{}
	for _, m := range regexp.MustCompile(`\{\{ template "([^"]+\.sql)" \. \}\}`).FindAllStringSubmatch(string(install), -1) {
		included[m[1]]++
	}
	files, err := fs.Glob(codeFiles, "code/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimPrefix(f, "code/")
		switch {
		case name == "install.sql" || name == "security.sql":
		case included[name] != 1:
			t.Errorf("install.sql includes %s %d times; it must include every function file once", name, included[name])
		}
		delete(included, name)
	}
	for name := range included {
		t.Errorf("install.sql includes %s, which is not in code/", name)
	}
}
