package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// commandArgs names the variable that makes this test binary run as jobbill-dev itself, with the
// variable's words as its arguments: a test can then send the command a real signal and read its
// exit status, as make and a shell do.
const commandArgs = "JOBBILL_DEV_TEST_COMMAND_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(commandArgs); ok {
		os.Args = append([]string{"jobbill-dev"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRunStopsCleanlyOnSignal checks how `jobbill-dev run` (make run) ends when a person stops
// it, with Ctrl-C (SIGINT) or SIGTERM, while it is still getting ready: it stops what it started,
// says so, and exits 0 — a stop the person asked for is no failure, and make prints "Error 1" for
// any other status. The run is held at a step that waits for the database — its migration, behind
// a lock the test holds on the ledger's version table — so the signal surely comes mid-run;
// Temporal is pointed at a closed port, so the run can reach no server's.
func TestRunStopsCleanlyOnSignal(t *testing.T) {
	ledgertest.Store(t) // the test database, migrated: the run's migration has nothing to do but wait
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx := context.Background()
			holder, err := pgx.Connect(ctx, ledgertest.MigrateDatabaseURL())
			require.NoError(t, err)
			t.Cleanup(func() { _ = holder.Close(ctx) })
			var pid int
			require.NoError(t, holder.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
			tx, err := holder.Begin(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback(ctx) })
			_, err = tx.Exec(ctx, `LOCK TABLE ledger_schema_version IN ACCESS EXCLUSIVE MODE`)
			require.NoError(t, err)

			cmd := exec.Command(os.Args[0])
			cmd.Dir = t.TempDir() // its log file, .dev/, goes there
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "JOBBILL_") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, commandArgs+"=run --exit",
				config.EnvName("database_url")+"="+ledgertest.DatabaseURL(),
				config.EnvName("migrate_database_url")+"="+ledgertest.MigrateDatabaseURL(),
				config.EnvName("temporal.address")+"=127.0.0.1:1")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill() })

			ledgertest.AwaitWaiter(t, pid, 2*time.Minute) // the run's migration waits for the lock
			require.NoError(t, cmd.Process.Signal(sig))
			err = cmd.Wait()
			require.NoError(t, err, "jobbill-dev run stopped by %s must exit 0:\n%s", sig, out.String())
			require.Contains(t, out.String(), "Stopped", out.String())
			require.NotContains(t, out.String(), "jobbill-dev:", "no error is printed:\n%s", out.String())
		})
	}
}
