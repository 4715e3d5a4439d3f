package main

// Black-box tests of the price and job commands: the command tree of the binary, run with
// arguments as an operator types them, against the test database (ledgertest) and a worker of
// this process on a task queue of its own (workertest), which the commands reach through their
// configuration. They need `bash scripts/ensure-postgres.sh` and `bash scripts/ensure-temporal.sh`.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
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

// TestPriceCommands checks `jobbill price set/list/history` (money rule 5: the price list, set by
// an operator, prices every job): a new price is version 1, the same figures again write nothing,
// a change is version 2; bad input — an unknown unit, no maximum for a metered kind, a fixed kind
// holding 2, a zero unit price, a malformed kind — fails with a clear error naming the flag and
// writes nothing; list shows each kind's current version, history every version, and an unknown
// kind is an error.
func TestPriceCommands(t *testing.T) {
	e := newCLIEnv(t)
	kind := cliKind(t, "transcribe")

	out := e.ok(t, "price", "set", kind, "--unit", "gpu_second", "--unit-price", "2", "--max-units", "300", "--memo", "launch")
	require.Contains(t, out, "version 1 set: 2 credits per GPU-second, at most 300 GPU-seconds per job (a job holds up to 600 credits) (applied)")
	out = e.ok(t, "price", "set", kind, "--unit", "gpu_second", "--unit-price", "2", "--max-units", "300")
	require.Contains(t, out, "version 1 already says")
	require.Contains(t, out, "nothing was written (already_applied)")
	out = e.ok(t, "price", "set", kind, "--unit", "gpu_second", "--unit-price", "3", "--max-units", "300", "--memo", "new GPUs")
	require.Contains(t, out, "version 2 set")

	bad := cliKind(t, "bad")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--unit", "hour", "--unit-price", "2"}, `--unit is "hour"`},
		{[]string{"--unit", "gpu_second", "--unit-price", "2"}, "--max-units is required for --unit gpu_second"},
		{[]string{"--unit", "job", "--unit-price", "40", "--max-units", "2"}, "--max-units is 2; a kind sold by the job holds exactly 1"},
		{[]string{"--unit", "job", "--unit-price", "0"}, "--unit-price is 0"},
		{[]string{"--unit", "gpu_second", "--unit-price", "1000000000000000", "--max-units", "2"}, "--unit-price"},
		{[]string{"--unit-price", "40"}, `required flag(s) "unit" not set`},
	} {
		out, err := e.run(t, append([]string{"price", "set", bad}, tc.args...)...)
		require.Error(t, err, "price set %v:\n%s", tc.args, out)
		require.Contains(t, err.Error(), tc.says)
	}
	_, err := e.run(t, "price", "set", "Render-4K", "--unit", "job", "--unit-price", "40")
	require.ErrorContains(t, err, "KIND")
	_, err = e.run(t, "price", "history", bad)
	require.ErrorContains(t, err, `unknown kind "`+bad+`": no price was ever set for it`, "no refused price was written")

	out = e.ok(t, "price", "list")
	require.Contains(t, out, "KIND")
	require.Regexp(t, kind+`\s+2\s+gpu_second\s+3\s+300\s+900\s`, out)
	var list []ledgerdb.Price
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "price", "list", "--json")), &list))
	var listed *ledgerdb.Price
	for i := range list {
		if list[i].Kind == kind {
			listed = &list[i]
		}
	}
	require.NotNil(t, listed)
	require.Equal(t, 2, listed.Version, "the list shows the current version")
	require.Equal(t, int64(3), listed.UnitPrice)

	out = e.ok(t, "price", "history", kind)
	require.Regexp(t, `(?m)^1\s+gpu_second\s+2\s+300\s+600\s.*launch$`, out)
	require.Regexp(t, `(?m)^2\s+gpu_second\s+3\s+300\s+900\s.*new GPUs$`, out)
	var history []ledgerdb.Price
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "price", "history", kind, "--json")), &history))
	require.Len(t, history, 2)
}

// TestJobCommandsUseTheServersPrice checks `jobbill job submit` and `job report` with kinds (money
// rule 5: a job names its kind, never an amount). A number where the kind goes — how a cost was
// given before — is refused as an unknown kind, saying prices are set by the server, and writes
// nothing (no job, balance unchanged); so is a max-units above the kind's. A metered job holds
// its unit price × max units; a negative --units-used is refused with nothing written; the usage
// reported settles it at used × unit price, with the rest of the hold released in one row. A job
// command names the job's account (job IDs belong to their account): a report without --account
// is refused with nothing written.
func TestJobCommandsUseTheServersPrice(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	acct := ledgertest.Account(t, e.Store, 1000)
	kind := ledgertest.Metered(t, e.Store, 3, 300)

	id := ledgertest.ID(t, "job")
	key := ledgerdb.JobKey{AccountID: acct, JobID: id}
	_, err := e.run(t, "job", "submit", id, acct, "40")
	require.EqualError(t, err, "unknown kind \"40\": prices are set by the server; `jobbill price list` shows the kinds")
	_, err = e.run(t, "job", "submit", id, acct, cliKind(t, "never-priced"))
	require.ErrorContains(t, err, "prices are set by the server")
	_, err = e.run(t, "job", "submit", id, acct, kind, "--max-units", "301")
	require.ErrorContains(t, err, "--max-units is 301")
	require.ErrorContains(t, err, "at most 300")
	_, err = e.run(t, "job", "submit", id, acct, kind, "--max-units", "0")
	require.ErrorContains(t, err, "--max-units is 0")
	_, err = e.Store.Job(ctx, key)
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound, "no refused submission was written")
	ledgertest.RequireBalance(t, e.Store, acct, 1000)

	var sub jobs.Submission
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "job", "submit", id, acct, kind, "--max-units", "100", "--input", "sim:hang")), &sub))
	require.Equal(t, ledgerdb.StateRunning, sub.Status.State)
	require.Equal(t, kind, sub.Status.Kind)
	require.Equal(t, int64(100), sub.Status.HeldUnits)
	require.Equal(t, int64(300), sub.Status.Held, "3 credits × 100 units, the server's price")

	_, err = e.run(t, "job", "report", id, "--account", acct, "--attempt", "1", "--output", "s3://out/"+id, "--units-used=-1")
	require.ErrorContains(t, err, "--units-used is -1; it must not be negative")
	_, err = e.run(t, "job", "report", id, "--attempt", "1", "--output", "s3://out/"+id, "--units-used", "37")
	require.ErrorContains(t, err, "--account is required")
	st, err := e.Jobs.Status(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, st.State, "the refused reports wrote nothing")

	e.ok(t, "job", "report", id, "--account", acct, "--attempt", "1", "--output", "s3://out/"+id, "--units-used", "37")
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err = e.Jobs.Wait(waitCtx, key, ledgerdb.StateDelivered)
	require.NoError(t, err)
	require.Equal(t, int64(111), st.Charged, "37 GPU-seconds × 3 credits")
	require.Equal(t, int64(189), st.Released)

	var status jobs.Status
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "job", "status", id, "--account", acct)), &status))
	require.Equal(t, st.Charged, status.Charged)
	require.Contains(t, status.Message, "111 of 300 held credits charged; 189 returned.")
	h, err := e.Store.History(ctx, acct, ledgerdb.HistoryPage{Limit: 100})
	require.NoError(t, err)
	var rows []ledgertest.Row
	for _, r := range h.Entries {
		if r.JobID == id {
			rows = append(rows, ledgertest.Row{Kind: r.Kind, Amount: r.Amount})
		}
	}
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -300}, {Kind: ledgerdb.KindRelease, Amount: 189}}, rows)
	ledgertest.RequireBalance(t, e.Store, acct, 1000-111)
}
