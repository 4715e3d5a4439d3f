package main

// The commands' tests are black boxes: the command tree of the binary, run with
// arguments as an operator types them, against the test database (ledgertest) and a worker of
// this process on a task queue of its own (workertest), which the commands reach through their
// configuration. They need Postgres and Temporal, named or the checkout's own (docs/development.md).
// This file holds what they share: cliEnv.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// cliEnv runs jobbill commands against the test ledger and a test worker.
type cliEnv struct {
	*workertest.Env
}

// newCLIEnv points every command at the test database and the worker's Temporal namespace and
// task queue, and clears the machine's own JOBBILL_* settings so none can steer a command
// elsewhere (at the dev database, say). It sets the environment, so its tests do not run in
// parallel.
func newCLIEnv(t *testing.T) *cliEnv {
	e := workertest.Shared(t, "cli-test", nil)
	for _, s := range config.Settings() {
		t.Setenv(s.Env, "")
	}
	t.Setenv(config.EnvName("temporal.address"), e.Config.Temporal.Address)
	t.Setenv(config.EnvName("temporal.namespace"), e.Config.Temporal.Namespace)
	t.Setenv(config.EnvName("temporal.task_queue"), e.Config.Temporal.TaskQueue)
	return &cliEnv{e}
}

// run runs `jobbill args…` and answers its output and error.
func (e *cliEnv) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"--database-url", ledgertest.DatabaseURL(), "--migrate-database-url", ledgertest.MigrateDatabaseURL()}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// ok runs a command that must succeed.
func (e *cliEnv) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.run(t, args...)
	require.NoError(t, err, "jobbill %v:\n%s", args, out)
	return out
}

// cliKind is a kind no other test or run has priced: prices are append-only and shared by the
// test database.
func cliKind(t *testing.T, prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
