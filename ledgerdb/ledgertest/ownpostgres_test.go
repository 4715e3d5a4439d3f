package ledgertest_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/internal/devdir"
	"github.com/jobbill/jobbill/internal/pgtest"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// childEnv marks a run of this test binary as a child of TestTestsStartTheirOwnPostgres.
const childEnv = "JOBBILL_LEDGERTEST_CHILD"

// ownCluster is the line ledgertest prints when it uses a cluster of its own.
var ownCluster = regexp.MustCompile(`ledgertest: the tests' own Postgres, (\S+), on 127\.0\.0\.1:(\d+) \(([a-z ]+),`)

// TestTestsStartTheirOwnPostgres checks that tests need no Postgres started for them: with no URL
// set, two test processes started at once (as `go test ./...` runs packages) make one throwaway
// cluster between them — one makes it while the other waits on its lock — and both use it, on a
// port of its own, never the local cluster's 5432; a process started later reuses it. Each child checks a money rule on it, the sum-of-rows rule: an account granted 100
// has a balance of 100, the sum of its rows. The cluster lives in a directory of the test's own
// (JOBBILL_TEST_SERVICES_DIR), made empty, so that it is made from nothing as on a fresh clone, and
// is stopped and removed at the end.
func TestTestsStartTheirOwnPostgres(t *testing.T) {
	ledgertest.NeedsPostgres(t)
	dev, err := devdir.Dir()
	require.NoError(t, err)
	services, err := os.MkdirTemp(dev, "own-postgres-test-")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		dir := filepath.Join(services, "pgtest")
		data, _ := filepath.EvalSymlinks(dir) // the temporary directory, when root's postgres user could not reach dir
		require.NoError(t, pgtest.Stop(ctx, dir))
		if data != "" {
			_ = os.RemoveAll(data)
		}
		_ = os.RemoveAll(services)
	})

	children := ledgertest.Children{
		Test: "TestOwnPostgresChild", Line: ownCluster, Service: "cluster",
		Env: append(ledgertest.EnvWithout(ledgertest.DatabaseURLEnv, ledgertest.MigrateDatabaseURLEnv),
			childEnv+"=1", devdir.TestServicesEnv+"="+services),
	}
	cluster := children.RequireShared(t, "made and started")
	require.NotEqual(t, "5432", cluster.Address, "the local cluster's port")
	pid, err := os.ReadFile(filepath.Join(cluster.Dir, "postmaster.pid"))
	require.NoError(t, err, "the cluster runs from the test's own directory")
	require.Equal(t, cluster.Address, strings.Split(string(pid), "\n")[3], "the postmaster of the test's directory listens on the port the children used")
}

// TestOwnPostgresChild is a child process of TestTestsStartTheirOwnPostgres, and skips otherwise:
// a test of the ledger on whatever ledgertest gives it, here a cluster of the tests' own. The
// sum-of-rows rule: an account granted 100 has a balance of 100, the sum of its rows.
func TestOwnPostgresChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("a child of TestTestsStartTheirOwnPostgres")
	}
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 100)
	ledgertest.RequireBalance(t, s, acct, 100)
}

// TestShortPointsAtAClosedPort checks that under -short, with no URL set, the helpers start
// nothing and answer URLs on a closed port, so that a test that reaches Postgres without skipping
// fails instead of using a database it was not pointed at.
func TestShortPointsAtAClosedPort(t *testing.T) {
	if !testing.Short() {
		t.Skip("checks -short")
	}
	t.Setenv(ledgertest.DatabaseURLEnv, "")
	t.Setenv(ledgertest.MigrateDatabaseURLEnv, "")
	require.Contains(t, ledgertest.DatabaseURL(), "@"+ledgertest.ClosedAddress+"/")
	require.Contains(t, ledgertest.MigrateDatabaseURL(), "@"+ledgertest.ClosedAddress+"/")
}

// TestOneURLWithoutTheOtherIsRefused checks that a test database named by one variable alone is
// refused, naming both: the tests' database as the application role and as its owner must be
// the same database, and neither is guessed.
func TestOneURLWithoutTheOtherIsRefused(t *testing.T) {
	t.Setenv(ledgertest.DatabaseURLEnv, "postgres://jobbill_app@"+ledgertest.ClosedAddress+"/none")
	t.Setenv(ledgertest.MigrateDatabaseURLEnv, "")
	want := "ledgertest: set both JOBBILL_TEST_DATABASE_URL and JOBBILL_TEST_MIGRATE_DATABASE_URL, or neither (the tests then start a Postgres of their own)"
	require.PanicsWithValue(t, want, func() { ledgertest.MigrateDatabaseURL() })
	require.PanicsWithValue(t, want, func() { ledgertest.DatabaseURL() })
}
