// Package ledgertest gives tests a migrated ledger on a real Postgres, and helpers that keep each
// test's rows apart and check the money rules.
//
// The tests connect as the service does, as the application role, so that every test also proves
// the role's grants are enough; migrations run as the schema's owner, as `jobbill migrate` does.
// Which Postgres: the one JOBBILL_TEST_DATABASE_URL and JOBBILL_TEST_MIGRATE_DATABASE_URL name,
// when they are set (`make test` names the local cluster of scripts/ensure-postgres.sh); when
// neither is, a throwaway cluster of the checkout's own (.dev/pgtest, package pgtest), which the
// first test process to need it makes or starts and every later one reuses. Under -short nothing is
// started: the helpers skip, and the URLs point at a closed port. No test ever reaches a database
// it was not pointed at and did not make.
//
// Tests never clean up: ledger rows cannot be deleted, by design, so each test names its
// accounts and jobs with a unique prefix instead.
package ledgertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/internal/devdir"
	"github.com/jobbill/jobbill/internal/pgtest"
	"github.com/jobbill/jobbill/ledgerdb"
)

// The variables that name the tests' database, as the application role and as its owner. Both
// are set, or neither.
const (
	// DatabaseURLEnv names the tests' database as the application role.
	DatabaseURLEnv = "JOBBILL_TEST_DATABASE_URL"
	// MigrateDatabaseURLEnv names the same database as its owner.
	MigrateDatabaseURLEnv = "JOBBILL_TEST_MIGRATE_DATABASE_URL"
)

// Database is the tests' database on the checkout's own cluster; each test deployment has one
// beside it ([DeploymentOf]).
const Database = "jobbill_test"

// ClosedAddress is where the test helpers point, under -short, what they would otherwise start:
// nothing listens on port 1, so a test that reaches a service without skipping first fails
// instead of using one (`make test-short` points the URLs there too).
const ClosedAddress = "127.0.0.1:1"

// DatabaseURL is the test database's URL as the application role: JOBBILL_TEST_DATABASE_URL; or,
// when no URL is set, the checkout's own cluster's, started when it is not running; under -short,
// a URL on [ClosedAddress]. It panics when the cluster cannot be started: tests call [Store]
// first, which fails them with the reason instead.
func DatabaseURL() string {
	app, _, err := urls()
	if err != nil {
		panic("ledgertest: " + err.Error())
	}
	return app
}

// MigrateDatabaseURL is the test database's URL as its owner: JOBBILL_TEST_MIGRATE_DATABASE_URL,
// or the same database as [DatabaseURL] as the owner. Tests use it only to migrate, to break
// rules on purpose inside a rolled-back transaction, and for set-up the application role may not
// do (the benchmark's bulk inserts).
func MigrateDatabaseURL() string {
	_, owner, err := urls()
	if err != nil {
		panic("ledgertest: " + err.Error())
	}
	return owner
}

// urls are the test database's URLs as the application role and as its owner, as [DatabaseURL]
// says.
func urls() (app, owner string, err error) {
	app, owner = os.Getenv(DatabaseURLEnv), os.Getenv(MigrateDatabaseURLEnv)
	switch {
	case app != "" && owner != "":
		return app, owner, nil
	case app != "" || owner != "":
		return "", "", fmt.Errorf("set both %s and %s, or neither (the tests then start a Postgres of their own)", DatabaseURLEnv, MigrateDatabaseURLEnv)
	case !flag.Parsed():
		// testing.Short would panic: asked at a package's initialization, before -short is known.
		return "", "", errors.New("the test database is asked for before the test flags are parsed: ask for it inside a test")
	case testing.Short():
		return "postgres://" + pgtest.App + "@" + ClosedAddress + "/none?sslmode=disable",
			"postgres://" + pgtest.Owner + "@" + ClosedAddress + "/none?sslmode=disable", nil
	}
	c, err := ownCluster()
	if err != nil {
		return "", "", err
	}
	return c.URL(pgtest.App, pgtest.AppPassword, Database), c.URL(pgtest.Owner, pgtest.OwnerPassword, Database), nil
}

var (
	cluster     *pgtest.Cluster
	clusterErr  error
	clusterOnce sync.Once
)

// ownCluster is the checkout's own test cluster, made or started by the first test process that
// needs it (pgtest.Ensure), with the tests' database and each test deployment's.
func ownCluster() (*pgtest.Cluster, error) {
	clusterOnce.Do(func() {
		if cluster, clusterErr = ensureCluster(); clusterErr != nil {
			clusterErr = fmt.Errorf("the tests' own Postgres (no %s set): %w", DatabaseURLEnv, clusterErr)
		}
	})
	return cluster, clusterErr
}

// ensureCluster makes or starts the cluster, or finds it running, and says which on stderr.
func ensureCluster() (*pgtest.Cluster, error) {
	dir, err := devdir.TestServices()
	if err != nil {
		return nil, err
	}
	databases := []string{Database}
	for _, d := range Deployments() {
		databases = append(databases, Database+"_"+d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	c, err := pgtest.Ensure(ctx, filepath.Join(dir, "pgtest"), databases)
	if err != nil {
		return nil, err
	}
	did := "running already"
	switch {
	case c.Made:
		did = "made and started"
	case c.Started:
		did = "started"
	}
	// Shown with -v, and with the output of a failing package.
	fmt.Fprintf(os.Stderr, "ledgertest: the tests' own Postgres, %s, on 127.0.0.1:%d (%s, %s)\n",
		c.DataDir, c.Port, did, time.Since(began).Round(time.Millisecond))
	return c, nil
}

// whose says where a test database comes from, for a failure's message.
func whose() string {
	if os.Getenv(DatabaseURLEnv) != "" {
		return "named by " + DatabaseURLEnv + " and " + MigrateDatabaseURLEnv + " (make db makes the local cluster's)"
	}
	return "the checkout's own cluster (make test-services-clean removes it)"
}

var (
	shared    *ledgerdb.Store
	sharedErr error
	once      sync.Once

	owner     *pgxpool.Pool
	ownerErr  error
	ownerOnce sync.Once
)

// NeedsPostgres skips the test under -short: `make check` runs only the tests that need no
// service, and `make test` runs the rest. Every helper here that opens the test database calls it
// first, so a test that reaches Postgres through them skips by itself; a test that opens the
// database some other way calls it at its start.
func NeedsPostgres(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres: make test runs it")
	}
}

// Store is a Store on the migrated test database, shared by every test of the process. Its pool
// holds up to 40 connections so that concurrency tests really run concurrently.
func Store(t testing.TB) *ledgerdb.Store {
	t.Helper()
	NeedsPostgres(t)
	app, owner, err := urls()
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	once.Do(func() {
		ctx := context.Background()
		if sharedErr = ledgerdb.Migrate(ctx, owner); sharedErr != nil {
			sharedErr = fmt.Errorf("as %s: %w", redact(owner), sharedErr)
			return
		}
		var cfg *pgxpool.Config
		if cfg, sharedErr = ledgerdb.PoolConfig(app); sharedErr != nil {
			return
		}
		cfg.MaxConns = 40
		var pool *pgxpool.Pool
		if pool, sharedErr = pgxpool.NewWithConfig(ctx, cfg); sharedErr != nil {
			return
		}
		shared = ledgerdb.New(pool)
	})
	if sharedErr != nil {
		t.Fatalf("test database %s, %s: %v", redact(app), whose(), sharedErr)
	}
	return shared
}

// OwnerPool is a small pool on the migrated test database as the schema's owner, shared by every
// test of the process. Only tests that must go past the application role's grants use it: to show
// that the database's triggers refuse even the owner, or to break a rule inside a transaction they
// roll back.
func OwnerPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	Store(t) // migrated first
	ownerOnce.Do(func() {
		var cfg *pgxpool.Config
		if cfg, ownerErr = ledgerdb.PoolConfig(MigrateDatabaseURL()); ownerErr != nil {
			return
		}
		cfg.MaxConns = 4
		owner, ownerErr = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	if ownerErr != nil {
		t.Fatalf("test database as its owner %s: %v", redact(MigrateDatabaseURL()), ownerErr)
	}
	return owner
}

var password = regexp.MustCompile(`:[^:@/]*@`)

func redact(url string) string { return password.ReplaceAllString(url, ":***@") }

// ID is a fresh ID for a job, account or key, unique across runs: prefix, the test's name and
// random hex, cut to the ledger's length limit.
func ID(t testing.TB, prefix string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-")
	id := fmt.Sprintf("%s-%s", prefix, hex.EncodeToString(b[:]))
	if room := ledgerdb.MaxIDLength - len(id) - 1; room > 0 {
		if len(name) > room {
			name = name[len(name)-room:]
		}
		id = fmt.Sprintf("%s-%s-%s", prefix, name, hex.EncodeToString(b[:]))
	}
	return id
}

// Account opens a fresh account and grants it credits (none when credits is 0).
func Account(t testing.TB, s *ledgerdb.Store, credits int64) string {
	t.Helper()
	ctx := context.Background()
	id := ID(t, "acct")
	if _, err := s.OpenAccount(ctx, id); err != nil {
		t.Fatalf("opening account %s: %v", id, err)
	}
	if credits > 0 {
		if _, err := s.Grant(ctx, ledgerdb.Credit{AccountID: id, Amount: credits, Key: "initial"}); err != nil {
			t.Fatalf("granting %d to %s: %v", credits, id, err)
		}
	}
	return id
}

// Fixed is a kind sold by the job at price credits, on the price list of s: "fixed-<price>".
// Tests share these kinds and never change their price, so every job of the kind costs price.
func Fixed(t testing.TB, s *ledgerdb.Store, price int64) string {
	t.Helper()
	return kind(t, s, ledgerdb.Price{Kind: fmt.Sprintf("fixed-%d", price), Unit: ledgerdb.UnitJob, UnitPrice: price, MaxUnits: 1})
}

// Metered is a kind metered by the GPU-second at unitPrice credits, holding at most maxUnits per
// job, on the price list of s: "metered-<unitPrice>x<maxUnits>". Tests share these kinds and never
// change their price.
func Metered(t testing.TB, s *ledgerdb.Store, unitPrice, maxUnits int64) string {
	t.Helper()
	return kind(t, s, ledgerdb.Price{Kind: fmt.Sprintf("metered-%dx%d", unitPrice, maxUnits), Unit: ledgerdb.UnitGPUSecond, UnitPrice: unitPrice, MaxUnits: maxUnits})
}

// kind sets p on the price list unless it is there already, and answers its kind.
func kind(t testing.TB, s *ledgerdb.Store, p ledgerdb.Price) string {
	t.Helper()
	p.Memo = "test price"
	if _, _, err := s.SetPrice(context.Background(), p); err != nil {
		t.Fatalf("setting the test price of %s: %v", p.Kind, err)
	}
	return p.Kind
}

// Charged submits a job of a kind sold at cost (see [Fixed]) to acct through the ledger alone,
// with request as its request,
// and charges it: a running job that no workflow runs, as a test that plays a workflow's part
// needs. It answers the charge's transition.
func Charged(t testing.TB, s *ledgerdb.Store, acct, jobID string, cost int64, request string) ledgerdb.Transition {
	t.Helper()
	ctx := context.Background()
	sub := ledgerdb.Submission{JobID: jobID, AccountID: acct, Kind: Fixed(t, s, cost), Request: []byte(request)}
	if _, err := s.Submit(ctx, sub); err != nil {
		t.Fatalf("submitting %s: %v", jobID, err)
	}
	charged, err := s.Charge(ctx, sub.Key())
	if err != nil {
		t.Fatalf("charging %s: %v", jobID, err)
	}
	return charged
}

// RequireSound audits each account and fails the test on any broken money rule (docs/design.md,
// the reversing-pairs, net-effect and sum-of-rows rules: one row per kind per job, each job's net
// matching its state, balance = sum of rows).
func RequireSound(t testing.TB, s *ledgerdb.Store, accountIDs ...string) {
	t.Helper()
	for _, id := range accountIDs {
		report, err := s.Audit(context.Background(), id)
		if err != nil {
			t.Fatalf("auditing %s: %v", id, err)
		}
		if !report.OK() {
			t.Fatalf("account %s breaks the money rules:\n%v", id, report.Violations)
		}
	}
}

// Row is one of a job's ledger rows, as [RequireRows] compares them.
type Row struct {
	Kind   ledgerdb.EntryKind
	Amount int64
}

// RequireRows checks a job's ledger rows, in order of writing: a charge or a reclaim of −cost, a
// refund of +cost (the reversing-pairs and price-list rules: at most one of each, every amount the
// job's recorded cost).
func RequireRows(t testing.TB, s *ledgerdb.Store, key ledgerdb.JobKey, cost int64, kinds ...ledgerdb.EntryKind) {
	t.Helper()
	want := []Row{}
	for _, k := range kinds {
		amount := -cost
		if k == ledgerdb.KindRefund {
			amount = cost
		}
		want = append(want, Row{Kind: k, Amount: amount})
	}
	if got := Rows(t, s, key); !slices.Equal(want, got) {
		t.Fatalf("ledger rows of job %s: got %v, want %v", key, got, want)
	}
}

// RequireBalance checks the account's balance, then audits the account (the reversing-pairs,
// net-effect and sum-of-rows rules: the balance is the sum of its rows, and each job's rows match
// its state).
func RequireBalance(t testing.TB, s *ledgerdb.Store, accountID string, want int64) {
	t.Helper()
	got, err := s.Balance(context.Background(), accountID)
	if err != nil {
		t.Fatalf("reading the balance of %s: %v", accountID, err)
	}
	if got != want {
		t.Fatalf("balance of %s: got %d, want %d", accountID, got, want)
	}
	RequireSound(t, s, accountID)
}

// Rows reads a job's ledger rows, in order of writing, straight from the table.
func Rows(t testing.TB, s *ledgerdb.Store, key ledgerdb.JobKey) []Row {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(),
		`SELECT kind, amount FROM ledger_entries WHERE job_id = $1 ORDER BY id`, key.String())
	if err != nil {
		t.Fatalf("reading the rows of job %s: %v", key, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Row])
	if err != nil {
		t.Fatalf("reading the rows of job %s: %v", key, err)
	}
	return got
}

// OwnKind is a fresh job kind of the test's own, unique across runs, for a test that sets or
// changes a price: the shared kinds of [Fixed] and [Metered] never change theirs. It is [ID] in
// the shape of a kind (lower case, at most 64 characters, starting with a letter), keeping the
// random part.
func OwnKind(t testing.TB) string {
	t.Helper()
	id := strings.ToLower(ID(t, "k"))
	id = regexp.MustCompile(`[^a-z0-9._-]+`).ReplaceAllString(id, "-")
	if len(id) > 64 {
		id = "k" + id[len(id)-63:]
	}
	if err := ledgerdb.ValidateKind(id); err != nil {
		t.Fatalf("kind %q: %v", id, err)
	}
	return id
}

// RequireRowAmounts checks a job's ledger rows, in order of writing, kind and amount each —
// for rows whose amounts are not ±cost (a release gives back part of a hold). The
// reversing-pairs and price-list rules: exactly these rows, each of exactly this amount.
func RequireRowAmounts(t testing.TB, s *ledgerdb.Store, key ledgerdb.JobKey, want ...Row) {
	t.Helper()
	if want == nil {
		want = []Row{}
	}
	got := Rows(t, s, key)
	if !slices.Equal(want, got) {
		t.Fatalf("ledger rows of job %s: got %v, want %v", key, got, want)
	}
}
