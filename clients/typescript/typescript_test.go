package typescript_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	temporalclient "go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/api/apitest"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// key is the secret of a new API key of the scope, for the account when the scope is a customer's.
func key(t *testing.T, env *workertest.Env, scope apikeys.Scope, account string) string {
	t.Helper()
	created, err := apikeys.NewStore(env.Store.Pool()).Create(context.Background(), apikeys.Spec{
		Scope: scope, AccountID: account, Name: "typescript client tests " + string(scope),
	})
	if err != nil {
		t.Fatalf("creating a %s key: %v", scope, err)
	}
	return created.Secret
}

// run runs one npm or node command in the package's directory with the environment env added,
// and fails the test with the command's whole output when it fails.
func run(ctx context.Context, t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	out, err := command(ctx, t, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	if testing.Verbose() {
		t.Logf("%s %s:\n%s", name, strings.Join(args, " "), out)
	}
}

// command runs name with args, and env added to this process's environment, and answers its
// combined output.
func command(ctx context.Context, t *testing.T, env []string, name string, args ...string) ([]byte, error) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("the TypeScript client's tests need %s (Node 20 or later) on the PATH: %v", name, err)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// install installs the package's dependencies from its lockfile (npm ci). The npm registry is
// across the network: a connection it drops (npm's "network" errors, after its own retries of
// each fetch) is tried again, twice, before the test fails; any other failure fails at once.
func install(ctx context.Context, t *testing.T) {
	t.Helper()
	args := []string{"ci", "--no-audit", "--no-fund", "--fetch-retries=4"}
	for try := 1; ; try++ {
		out, err := command(ctx, t, nil, "npm", args...)
		if err == nil {
			return
		}
		if try == 3 || !strings.Contains(string(out), "npm error network") || ctx.Err() != nil {
			t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("npm ci lost the registry (try %d of 3); trying again:\n%s", try, out)
		time.Sleep(time.Duration(try) * 5 * time.Second)
	}
}

// TestTypeScriptClient runs the TypeScript client's tests (clients/typescript/test) against the
// real API and the real Temporal dev server, with a worker of this process on a task queue of its
// own and a policy that settles jobs in seconds. It installs the package from its lockfile
// (npm ci), builds it with tsc and runs node --test; the TypeScript tests check, through the API
// and through @temporalio/client, the delivered, recovered, refunded and rejected stories (the
// reversing-pairs, net-effect, price-list and remembered-IDs rules: one charge per job, refunds and
// reclaims in pairs, a kind and never an amount, an ID never charged twice), the shared submission
// decision table, and that bad input is refused with nothing written. Afterwards every account the
// tests used must still be sound (the sum-of-rows rule: balance = the sum of its rows).
func TestTypeScriptClient(t *testing.T) {
	env := workertest.Shared(t, "ts-client", func(cfg *config.Config) {
		cfg.Policy = workertest.QuickPolicy()
		cfg.Policy.MaximumAttempts = 2
		cfg.Runner.Simulated.Duration = 500 * time.Millisecond
	})
	rich := ledgertest.Account(t, env.Store, 1000)
	viaTemporal := ledgertest.Account(t, env.Store, 1000)
	poor := ledgertest.Account(t, env.Store, 10)
	kind := ledgertest.Fixed(t, env.Store, 40)
	withBlocks := ledgertest.Account(t, env.Store, 0)
	for _, grant := range []ledgerdb.Credit{
		{AccountID: withBlocks, Amount: 100, Key: "bought", Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.01"}},
		{AccountID: withBlocks, Amount: 20, Key: "welcome", Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional}},
	} {
		if _, err := env.Store.Grant(context.Background(), grant); err != nil {
			t.Fatalf("granting %s: %v", grant.Key, err)
		}
	}

	cfg := config.Default().API
	cfg.RequestTimeout = 20 * time.Second
	cfg.RateLimit = config.RateLimit{PerSecond: 10_000, Burst: 10_000}
	// Every answer the TypeScript tests provoke is held to api/openapi.yaml, as the Go tests' are.
	srv := httptest.NewServer(apitest.Conform(t, api.New(api.Options{Config: cfg, Jobs: env.Jobs, Ledger: env.Store}).Handler()))
	t.Cleanup(srv.Close)

	// A second API over the same ledger whose job service cannot reach Temporal, and a running job
	// whose result the TypeScript tests report to it.
	down, err := temporalclient.NewLazyClient(temporalclient.Options{HostPort: "127.0.0.1:1", Namespace: env.Config.Temporal.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	unreachable := jobs.New(jobs.Options{Temporal: down, Ledger: env.Store, TaskQueue: env.Config.Temporal.TaskQueue,
		Namespace: env.Config.Temporal.Namespace})
	downSrv := httptest.NewServer(apitest.Conform(t, api.New(api.Options{Config: cfg, Jobs: unreachable, Ledger: env.Store}).Handler()))
	t.Cleanup(downSrv.Close)
	downJob := ledgertest.ID(t, "down")
	if _, err := workertest.Submit(context.Background(), t, env.Jobs, jobs.Job{ID: downJob, AccountID: rich, Kind: kind, InputRef: "sim:hang"}); err != nil {
		t.Fatalf("submitting the job whose result is reported while Temporal is down: %v", err)
	}

	vars := map[string]string{
		"JOBBILL_TS_E2E":                "1",
		"JOBBILL_TS_API_URL":            srv.URL,
		"JOBBILL_TS_KIND":               kind,
		"JOBBILL_TS_PRICE":              "40",
		"JOBBILL_TS_ACCOUNT":            rich,
		"JOBBILL_TS_CUSTOMER_KEY":       key(t, env, apikeys.ScopeCustomer, rich),
		"JOBBILL_TS_TEMPORAL_ACCOUNT":   viaTemporal,
		"JOBBILL_TS_TEMPORAL_KEY":       key(t, env, apikeys.ScopeCustomer, viaTemporal),
		"JOBBILL_TS_POOR_ACCOUNT":       poor,
		"JOBBILL_TS_POOR_KEY":           key(t, env, apikeys.ScopeCustomer, poor),
		"JOBBILL_TS_BLOCKS_ACCOUNT":     withBlocks,
		"JOBBILL_TS_BLOCKS_KEY":         key(t, env, apikeys.ScopeCustomerRead, withBlocks),
		"JOBBILL_TS_RUNNER_KEY":         key(t, env, apikeys.ScopeRunner, ""),
		"JOBBILL_TS_TEMPORAL_ADDRESS":   env.Config.Temporal.Address,
		"JOBBILL_TS_TEMPORAL_NAMESPACE": env.Config.Temporal.Namespace,
		"JOBBILL_TS_TASK_QUEUE":         env.Config.Temporal.TaskQueue,
		"JOBBILL_TS_DOWN_API_URL":       downSrv.URL,
		"JOBBILL_TS_DOWN_JOB_ID":        downJob,
	}
	var extra []string
	for k, v := range vars {
		extra = append(extra, fmt.Sprintf("%s=%s", k, v))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	install(ctx, t)
	run(ctx, t, nil, "npm", "run", "build")
	tests, err := filepath.Glob("dist/test/*.test.js")
	if err != nil || len(tests) == 0 {
		t.Fatalf("the build wrote no tests under dist/test (%v)", err)
	}
	run(ctx, t, extra, "node", append([]string{"--test"}, tests...)...)

	pending, err := env.Store.UnappliedResults(context.Background(), 0, 10, rich)
	if err != nil || len(pending) != 1 || pending[0].Report.Key.JobID != downJob {
		t.Errorf("the result reported while Temporal was down must wait in the ledger's inbox; it holds %+v (%v)", pending, err)
	}
	ledgertest.RequireSound(t, env.Store, rich, viaTemporal, poor, withBlocks)
}
