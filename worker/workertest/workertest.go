// Package workertest gives tests a real worker in their own process, running against the tests'
// Temporal (or a Temporal of the test's own, [Start]) and the test database on a task queue of its
// own, so that no other test process's worker takes its tasks and a checker scoped to the queue
// sees only its workflows.
//
// The tests' Temporal is the one JOBBILL_TEMPORAL_ADDRESS names, when it is set (`make test`
// names the dev server of scripts/ensure-temporal.sh); when it is not, a dev server of the
// checkout's own (.dev/temporal-test, devserver.Ensure), which the first test process to need it
// starts and every later one reuses. Under -short nothing is started: the helpers skip, and the
// address is a closed port (ledgertest.ClosedAddress).
package workertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/internal/devdir"
	"github.com/jobbill/jobbill/internal/devserver"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker"
	"github.com/jobbill/jobbill/workflows"
)

// Env is a running worker and the clients tests share with it.
type Env struct {
	// Config is the worker's configuration, task queue included.
	Config config.Config
	// Client is the Temporal client the worker polls with.
	Client client.Client
	// Store is the test ledger.
	Store *ledgerdb.Store
	// Jobs starts jobs on the worker's task queue with the configured policy; the simulated
	// runner reports late results through it.
	Jobs *jobs.Service

	worker sdkworker.Worker
}

var (
	mu      sync.Mutex
	started = map[string]*Env{}
)

// Shared is the process's worker called name, started on first use: the default configuration
// with a task queue unique to this process, then configure (which may be nil). The worker lives as
// long as the test process; the tests share it and may run in parallel. It skips the test only
// under -short ([NeedsTemporal]); otherwise it fails it when the tests' Temporal cannot be reached
// or started: CI must not pass by not checking.
func Shared(t testing.TB, name string, configure func(*config.Config)) *Env {
	t.Helper()
	NeedsTemporal(t)
	store := ledgertest.Store(t)
	if _, err := address(); err != nil {
		t.Fatalf("these tests need Temporal: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if env := started[name]; env != nil {
		return env
	}
	cfg := Config(name)
	cfg.Runner.Simulated.FailureRate = 0
	if configure != nil {
		configure(&cfg)
	}
	env, err := start(store, cfg)
	if err != nil {
		t.Fatalf("these tests need Temporal, at %s (%s): %v", cfg.Temporal.Address, whose(), err)
	}
	started[name] = env
	return env
}

// NeedsTemporal skips the test under -short: `make check` runs only the tests that need no
// service, and `make test` runs the rest. Shared and Start call it first, so a test that reaches
// Temporal through them skips by itself; a test that dials Temporal, or starts a server or the
// CLI, before either calls it at its start.
func NeedsTemporal(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Temporal and Postgres: make test runs it")
	}
}

// QuickPolicy makes a job settle in seconds instead of the GPU defaults' minutes: 3 attempts,
// 0.5 s then 1 s apart, and 20 s to wait for a late result — long enough that a result a test
// reports reaches the job's own run, not the fallback. Its timeouts are for work that finishes
// (simulated work of a second at most) or that the test ends itself, and are far from anything a
// loaded machine can eat: an attempt may run a minute and go 30 s without a heartbeat. The SDK
// sends heartbeats at most every 0.8 × the heartbeat timeout, so a long attempt has 6 s of slack
// for each, and a short one ends before its second is due. A job whose work never finishes
// ("sim:hang") stays running for minutes, however slowly the test acts on it. A test that wants
// its attempts to time out uses [TimeoutPolicy]; tests that need other timing change fields of
// it and say why.
func QuickPolicy() workflows.Policy {
	return workflows.Policy{
		InitialInterval:    500 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Second,
		MaximumAttempts:    3,
		StartToClose:       time.Minute,
		HeartbeatTimeout:   30 * time.Second,
		LateResultWindow:   20 * time.Second,
	}
}

// TimeoutPolicy is QuickPolicy for jobs whose attempts must time out: every attempt may run 2 s.
// Only work that never finishes by itself may run under it ("sim:hang", and the overrunning
// attempts of "sim:late:N"), so that its timeouts are certain whatever the machine's load, and
// short, so that a test waiting for them stays quick.
func TimeoutPolicy() workflows.Policy {
	p := QuickPolicy()
	p.StartToClose = 2 * time.Second
	p.HeartbeatTimeout = 2 * time.Second
	return p
}

// DefaultNamespace is the Temporal namespace tests run in, which scripts/ensure-temporal.sh
// creates beside jobbill's own: tests never touch the namespace a deployment (or `make run`)
// uses, its reconcile schedule, or the workflows a newcomer opens the Web UI to see.
const DefaultNamespace = "jobbill-test"

// ServerNamespaces are the namespaces of the tests' own dev server, those scripts/ensure-temporal.sh
// makes (the root's cluster_test.go keeps the two lists equal): jobbill's own and the tests'.
func ServerNamespaces() []string { return []string{workflows.DefaultNamespace, DefaultNamespace} }

// address is the tests' Temporal: JOBBILL_TEMPORAL_ADDRESS; or, when it is not set, the checkout's
// own dev server, started when it does not run; under -short, a closed port.
func address() (string, error) {
	if addr := os.Getenv(config.EnvName("temporal.address")); addr != "" {
		return addr, nil
	}
	if !flag.Parsed() {
		// testing.Short would panic: asked at a package's initialization, before -short is known.
		return "", errors.New("the tests' Temporal is asked for before the test flags are parsed: ask for it inside a test")
	}
	if testing.Short() {
		return ledgertest.ClosedAddress, nil
	}
	serverOnce.Do(func() {
		if server, serverErr = ownServer(); serverErr != nil {
			serverErr = fmt.Errorf("the tests' own Temporal dev server (no %s set): %w", config.EnvName("temporal.address"), serverErr)
		}
	})
	return server, serverErr
}

var (
	server     string
	serverErr  error
	serverOnce sync.Once
)

// ownServer is the address of the checkout's own dev server for its tests (devserver.Ensure),
// started by the first test process that needs it, with jobbill's namespace and the tests'.
func ownServer() (string, error) {
	dir, err := devdir.TestServices()
	if err != nil {
		return "", err
	}
	bin, err := devserver.CLI("")
	if err != nil {
		return "", err
	}
	namespaces := ServerNamespaces()
	if !slices.Contains(namespaces, Namespace()) {
		namespaces = append(namespaces, Namespace())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	dir = filepath.Join(dir, "temporal-test")
	addr, started, err := devserver.Ensure(ctx, bin, dir, namespaces)
	if err != nil {
		return "", err
	}
	did := "running already"
	if started {
		did = "started"
	}
	// Shown with -v, and with the output of a failing package.
	fmt.Fprintf(os.Stderr, "workertest: the tests' own Temporal dev server, %s, on %s (%s, %s)\n",
		dir, addr, did, time.Since(began).Round(time.Millisecond))
	return addr, nil
}

// whose says where the tests' Temporal comes from, for a failure's message.
func whose() string {
	if os.Getenv(config.EnvName("temporal.address")) != "" {
		return "named by " + config.EnvName("temporal.address") + " (make temporal starts the local dev server)"
	}
	return "the checkout's own dev server"
}

// Namespace is the Temporal namespace of the tests: JOBBILL_TEST_TEMPORAL_NAMESPACE, or
// DefaultNamespace.
func Namespace() string {
	if ns := os.Getenv("JOBBILL_TEST_TEMPORAL_NAMESPACE"); ns != "" {
		return ns
	}
	return DefaultNamespace
}

// Config is the default configuration pointed at the tests' Temporal (JOBBILL_TEMPORAL_ADDRESS,
// or the checkout's own dev server, started when it does not run), the tests' namespace, and a task
// queue of name's own, unique to this process, so that no other test process's worker takes its
// tasks. It panics when the checkout's dev server cannot be started; [Shared] fails its test with
// the reason instead.
func Config(name string) config.Config {
	var b [4]byte
	_, _ = rand.Read(b[:])
	cfg := config.Default()
	addr, err := address()
	if err != nil {
		panic("workertest: " + err.Error())
	}
	cfg.Temporal.Address = addr
	cfg.Temporal.Namespace = Namespace()
	cfg.Temporal.TaskQueue = fmt.Sprintf("jobbill-%s-%d-%s", name, os.Getpid(), hex.EncodeToString(b[:]))
	return cfg
}

// Start starts a worker of the test's own with cfg — which may point at another Temporal address
// and namespace than the shared dev server's, such as a dev server the test starts and stops
// itself — over the test database. The worker stops, and its client closes, when the test ends.
// It fails the test when Temporal cannot be reached.
func Start(t testing.TB, cfg config.Config) *Env {
	t.Helper()
	NeedsTemporal(t)
	env, err := start(ledgertest.Store(t), cfg)
	if err != nil {
		t.Fatalf("starting a test worker against Temporal at %s (namespace %s): %v", cfg.Temporal.Address, cfg.Temporal.Namespace, err)
	}
	t.Cleanup(env.stop)
	return env
}

// start dials Temporal as cfg says and starts a worker on its task queue, with a job service of the
// same configuration: the one way every test worker is built.
func start(store *ledgerdb.Store, cfg config.Config) (*Env, error) {
	// The worker's log goes to stderr, which go test shows only for a failing package (or -v).
	logger, err := connect.NewLogger(config.Log{Level: "warn", Format: "console", Output: "stderr"})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc, err := connect.Dial(ctx, cfg, logger, nil)
	if err != nil {
		return nil, err
	}
	st := connect.NewJobs(cfg, tc, store, nil)
	w := worker.New(cfg, tc, store, st, nil)
	if err := w.Start(); err != nil {
		tc.Close()
		return nil, fmt.Errorf("starting the worker on %s: %w", cfg.Temporal.TaskQueue, err)
	}
	return &Env{Config: cfg, Client: tc, Store: store, Jobs: st, worker: w}, nil
}

// stop stops the worker and closes its client. Shared workers are never stopped: they live as long
// as the test process.
func (e *Env) stop() {
	e.worker.Stop()
	e.Client.Close()
}

// JobsWith is a job service on the worker's task queue whose jobs get policy p.
func (e *Env) JobsWith(p workflows.Policy) *jobs.Service {
	return jobs.New(jobs.Options{
		Temporal:  e.Client,
		Ledger:    e.Store,
		TaskQueue: e.Config.Temporal.TaskQueue,
		Namespace: e.Config.Temporal.Namespace,
		UIURL:     e.Config.Temporal.UIURL,
		Policy:    p,
	})
}
