package workertest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"

	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/internal/devdir"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// childEnv marks a run of this test binary as a child of TestTestsStartTheirOwnTemporal.
const childEnv = "JOBBILL_WORKERTEST_CHILD"

// ownServer is the line workertest prints when it uses a dev server of its own.
var ownServer = regexp.MustCompile(`workertest: the tests' own Temporal dev server, (\S+), on (127\.0\.0\.1:\d+) \(([a-z ]+),`)

// TestTestsStartTheirOwnTemporal checks that tests need no Temporal started for them: with no
// address set, two test processes started at once start one dev server between them — one starts
// it while the other waits on its lock — and both run a job on it, never on the local dev server's
// 7233; a process started later reuses it. Each child's job is delivered with one charge (the
// reversing-pairs rule) on a worker of its own, in the tests' namespace, whose search attributes
// the server has. The server lives in a directory of the test's own (JOBBILL_TEST_SERVICES_DIR),
// made empty, so that it starts from nothing as on a fresh clone, and is stopped and removed at
// the end. The children use the parent's test database.
func TestTestsStartTheirOwnTemporal(t *testing.T) {
	workertest.NeedsTemporal(t)
	ledgertest.Store(t) // migrated, for the children
	dev, err := devdir.Dir()
	require.NoError(t, err)
	services, err := os.MkdirTemp(dev, "own-temporal-test-")
	require.NoError(t, err)
	t.Cleanup(func() {
		stopServer(t, filepath.Join(services, "temporal-test"))
		_ = os.RemoveAll(services)
	})

	children := ledgertest.Children{
		Test: "TestOwnTemporalChild", Line: ownServer, Service: "dev server",
		Env: append(ledgertest.EnvWithout(config.EnvName("temporal.address")), childEnv+"=1", devdir.TestServicesEnv+"="+services,
			ledgertest.DatabaseURLEnv+"="+ledgertest.DatabaseURL(), ledgertest.MigrateDatabaseURLEnv+"="+ledgertest.MigrateDatabaseURL()),
	}
	server := children.RequireShared(t, "started")
	require.Equal(t, filepath.Join(services, "temporal-test"), server.Dir)
	require.NotEqual(t, "127.0.0.1:7233", server.Address, "the local dev server's address")
}

// stopServer stops the dev server recorded in dir, as make test-services-stop does, and waits
// until it has exited.
func stopServer(t *testing.T, dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, "server.pid"))
	if err != nil {
		return
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if pid <= 0 || !strings.Contains(string(cmdline), filepath.Join(dir, "temporal.db")) {
		return // not this server
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// TestOwnTemporalChild is a child process of TestTestsStartTheirOwnTemporal, and skips otherwise:
// a job run end to end on whatever Temporal workertest gives it, here a dev server of the tests'
// own. The reversing-pairs rule: a job delivered on its first attempt has one charge, its cost.
// The server has the search attributes the workflows upsert in each of its namespaces.
func TestOwnTemporalChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("a child of TestTestsStartTheirOwnTemporal")
	}
	e := workertest.Shared(t, "own-temporal", func(cfg *config.Config) {
		cfg.Policy = workertest.QuickPolicy()
		cfg.Runner.Simulated.Duration = 100 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ns := range workertest.ServerNamespaces() {
		registered, err := e.Client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		require.NoError(t, err, "namespace %s", ns)
		for _, sa := range workflows.SearchAttributes() {
			require.Contains(t, registered.GetCustomAttributes(), sa.Name, "namespace %s", ns)
		}
	}
	acct := ledgertest.Account(t, e.Store, 100)
	key := ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "job")}
	_, err := e.Jobs.Submit(ctx, jobs.Job{ID: key.JobID, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 40), InputRef: "sim:ok"})
	require.NoError(t, err)
	_, err = e.Jobs.Wait(ctx, key, ledgerdb.StateDelivered)
	require.NoError(t, err)
	ledgertest.RequireRows(t, e.Store, key, 40, ledgerdb.KindCharge)
	ledgertest.RequireBalance(t, e.Store, acct, 60)
}

// TestShortPointsTemporalAtAClosedPort checks that under -short, with no address set, the helpers
// start no dev server and point the tests' configuration at a closed port, so that a test that
// reaches Temporal without skipping fails instead of using a server it was not pointed at.
func TestShortPointsTemporalAtAClosedPort(t *testing.T) {
	if !testing.Short() {
		t.Skip("checks -short")
	}
	t.Setenv(config.EnvName("temporal.address"), "")
	require.Equal(t, ledgertest.ClosedAddress, workertest.Config("short").Temporal.Address)
}
