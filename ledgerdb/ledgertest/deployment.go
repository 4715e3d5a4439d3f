package ledgertest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/ledgerdb"
)

// The test deployments: each has a database of its own beside the tests' shared one, named after
// it (jobbill_test_worker beside jobbill_test), which scripts/ensure-postgres.sh creates, as does
// the tests' own cluster (pgtest); [Deployments] lists them, and the root's cluster_test.go keeps
// the script's list equal.
const (
	// DeploymentWorker is the worker package's: its tests run `jobbill worker` processes.
	DeploymentWorker = "worker"
	// DeploymentChaos is the chaos run's.
	DeploymentChaos = "chaos"
)

// A Deployment is a database of a test deployment's own: the ledger of tests that run whole
// `jobbill worker` processes, as production does. A worker process creates the reconcile schedule,
// whose pass reads every account of its database (no account list, as deployed), and delivers the
// webhooks of every account's endpoints; on the tests' shared database that pass would heal, and
// that delivery worker send, other tests' jobs — jobs whose workflows live on another Temporal
// server or namespace, and look gone from this one. Only one test at a time may run a deployment:
// the tests of one package run one after another.
type Deployment struct {
	// Name is the deployment's name, the suffix of its database's.
	Name string
	// DatabaseURL is its database as the application role, for the worker processes.
	DatabaseURL string
	// MigrateDatabaseURL is its database as the owner.
	MigrateDatabaseURL string
	// Store is a ledger on it, shared by the test process.
	Store *ledgerdb.Store

	ownerOnce sync.Once
	owner     *pgxpool.Pool
	ownerErr  error
}

// OwnerPool is a small pool on the deployment's database as the schema's owner, shared by the
// test process: for tests that must go past the application role's grants, as [OwnerPool] is for
// the tests' shared database.
func (d *Deployment) OwnerPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	d.ownerOnce.Do(func() {
		var cfg *pgxpool.Config
		if cfg, d.ownerErr = ledgerdb.PoolConfig(d.MigrateDatabaseURL); d.ownerErr != nil {
			return
		}
		cfg.MaxConns = 2
		d.owner, d.ownerErr = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	if d.ownerErr != nil {
		t.Fatalf("test deployment %s as its owner %s: %v", d.Name, redact(d.MigrateDatabaseURL), d.ownerErr)
	}
	return d.owner
}

// Deployments are the names of the test deployments.
func Deployments() []string { return []string{DeploymentWorker, DeploymentChaos} }

var (
	deploymentsMu sync.Mutex
	deployments   = map[string]*Deployment{}
)

// DeploymentOf is the test deployment called name (DeploymentWorker, DeploymentChaos), migrated on
// first use: the tests' database URLs with the database name suffixed by "_" and name.
func DeploymentOf(t testing.TB, name string) *Deployment {
	t.Helper()
	NeedsPostgres(t)
	deploymentsMu.Lock()
	defer deploymentsMu.Unlock()
	if d := deployments[name]; d != nil {
		return d
	}
	d := &Deployment{Name: name}
	app, owner, err := urls()
	if err == nil {
		d.DatabaseURL, err = suffixDatabase(app, name)
	}
	if err == nil {
		d.MigrateDatabaseURL, err = suffixDatabase(owner, name)
	}
	if err != nil {
		t.Fatalf("test deployment %s: %v", name, err)
	}
	ctx := context.Background()
	if err := ledgerdb.Migrate(ctx, d.MigrateDatabaseURL); err != nil {
		t.Fatalf("test deployment %s: migrating %s, %s: %v", name, redact(d.MigrateDatabaseURL), whose(), err)
	}
	cfg, err := ledgerdb.PoolConfig(d.DatabaseURL)
	if err != nil {
		t.Fatalf("test deployment %s: %v", name, err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("test deployment %s: %v", name, err)
	}
	d.Store = ledgerdb.New(pool)
	deployments[name] = d
	return d
}

// suffixDatabase is rawURL with "_" and suffix appended to its database name.
func suffixDatabase(rawURL, suffix string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("the test database URL %s: %w", redact(rawURL), err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		return "", fmt.Errorf("the test database URL %s names no database", redact(rawURL))
	}
	u.Path = "/" + db + "_" + suffix
	return u.String(), nil
}
