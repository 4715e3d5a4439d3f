// Package ledgertest gives tests a migrated ledger on the real test Postgres, and helpers that
// keep each test's rows apart and check the money rules.
//
// The tests connect as the service does, as the application role (JOBBILL_TEST_DATABASE_URL,
// default jobbill_app on the database scripts/ensure-postgres.sh creates), so that every test also
// proves the role's grants are enough. Migrations run as the schema's owner
// (JOBBILL_TEST_MIGRATE_DATABASE_URL, default jobbill on the same database), as `jobbill migrate`
// does. Tests never clean up: ledger rows cannot be deleted, by design, so each test names its
// accounts and jobs with a unique prefix instead.
package ledgertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/ledgerdb"
)

// DefaultDatabaseURL is the test database that scripts/ensure-postgres.sh creates, as the
// application role.
const DefaultDatabaseURL = "postgres://jobbill_app:jobbill_app@127.0.0.1:5432/jobbill_test?sslmode=disable"

// DefaultMigrateDatabaseURL is the same database as its owner, the role migrations run as.
const DefaultMigrateDatabaseURL = "postgres://jobbill:jobbill@127.0.0.1:5432/jobbill_test?sslmode=disable"

// DatabaseURL is the test database's URL as the application role: JOBBILL_TEST_DATABASE_URL, or
// DefaultDatabaseURL.
func DatabaseURL() string {
	if url := os.Getenv("JOBBILL_TEST_DATABASE_URL"); url != "" {
		return url
	}
	return DefaultDatabaseURL
}

// MigrateDatabaseURL is the test database's URL as its owner: JOBBILL_TEST_MIGRATE_DATABASE_URL,
// or DefaultMigrateDatabaseURL. Tests use it only to migrate, to break rules on purpose inside a
// rolled-back transaction, and for set-up the application role may not do (the benchmark's bulk
// inserts).
func MigrateDatabaseURL() string {
	if url := os.Getenv("JOBBILL_TEST_MIGRATE_DATABASE_URL"); url != "" {
		return url
	}
	return DefaultMigrateDatabaseURL
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
	once.Do(func() {
		ctx := context.Background()
		if sharedErr = ledgerdb.Migrate(ctx, MigrateDatabaseURL()); sharedErr != nil {
			sharedErr = fmt.Errorf("as %s: %w", redact(MigrateDatabaseURL()), sharedErr)
			return
		}
		var cfg *pgxpool.Config
		if cfg, sharedErr = ledgerdb.PoolConfig(DatabaseURL()); sharedErr != nil {
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
		t.Fatalf("test database %s: %v (run scripts/ensure-postgres.sh, or set JOBBILL_TEST_DATABASE_URL and JOBBILL_TEST_MIGRATE_DATABASE_URL)", redact(DatabaseURL()), sharedErr)
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

// Promotional grants the account a promotional block of amount credits that expires in a day,
// under key, and answers the block (ExpireBlock expires it at once).
func Promotional(t testing.TB, s *ledgerdb.Store, acct, key string, amount int64) int64 {
	t.Helper()
	tomorrow := time.Now().Add(24 * time.Hour)
	g, err := s.Grant(context.Background(), ledgerdb.Credit{AccountID: acct, Amount: amount, Key: key,
		Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, ExpiresAt: &tomorrow}})
	if err != nil {
		t.Fatalf("granting %d promotional credits to %s: %v", amount, acct, err)
	}
	return BlockOf(t, s, g)
}

// BlockOf answers the credit block a grant made.
func BlockOf(t testing.TB, s *ledgerdb.Store, grant ledgerdb.Posting) int64 {
	t.Helper()
	var id int64
	if err := s.Pool().QueryRow(context.Background(), `SELECT block_id FROM ledger_entries WHERE id = $1`, grant.EntryID).Scan(&id); err != nil {
		t.Fatalf("reading the block of grant row %d: %v", grant.EntryID, err)
	}
	return id
}

// ExpireBlock moves a credit block's clock back, as if its expiry had come an hour ago (as the
// owner: credit_blocks is the ledger's functions' to write), and runs the expiry until the block
// is expired. The expiry expires every due block of the database, other tests' too.
func ExpireBlock(t testing.TB, s *ledgerdb.Store, block int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := OwnerPool(t).Exec(ctx, `UPDATE credit_blocks
		SET effective_at = now() - interval '2 hours', expires_at = now() - interval '1 hour' WHERE id = $1`, block); err != nil {
		t.Fatalf("moving block %d's clock back: %v", block, err)
	}
	for more := true; more; {
		var err error
		if _, more, err = s.ExpireBlocks(ctx, ledgerdb.MaxExpiriesPerCall); err != nil {
			t.Fatalf("expiring blocks: %v", err)
		}
	}
	var expired bool
	if err := s.Pool().QueryRow(ctx, `SELECT expired_at IS NOT NULL FROM credit_blocks WHERE id = $1`, block).Scan(&expired); err != nil || !expired {
		t.Fatalf("block %d not expired (%v)", block, err)
	}
}

// ExpiredRefund is the story of a refund that returned credits to a block that had expired
// (RefundIntoExpiredBlock).
type ExpiredRefund struct {
	// Account is the account: granted 100 paid credits and 15 promotional ones.
	Account string
	// Job is the 40-credit job, charged 15 promotional and 25 paid credits, then refunded (for a
	// timeout): its 25 paid credits stay the account's, its 15 promotional ones expire at once.
	Job ledgerdb.JobKey
	// Kept is a 10-credit job charged after it and refunded (the work failed): all paid credits,
	// none expire.
	Kept ledgerdb.JobKey
	// Block is the promotional block, expired between the charges and the refunds (holding
	// nothing then, it was marked expired with no row).
	Block int64
	// Refund is the job's refund.
	Refund ledgerdb.Transition
}

// RefundIntoExpiredBlock writes the story ExpiredRefund tells, on a new account.
func RefundIntoExpiredBlock(t testing.TB, s *ledgerdb.Store) ExpiredRefund {
	t.Helper()
	ctx := context.Background()
	x := ExpiredRefund{Account: Account(t, s, 100)}
	x.Block = Promotional(t, s, x.Account, "promo", 15)
	x.Job = Charged(t, s, x.Account, ID(t, "job"), 40, "s3://in/1").Job.Key()
	x.Kept = Charged(t, s, x.Account, ID(t, "kept"), 10, "s3://in/2").Job.Key()
	ExpireBlock(t, s, x.Block)
	var err error
	if x.Refund, err = s.Refund(ctx, x.Job, ledgerdb.ReasonTimedOut, "timed out on gpu-7.internal", 3); err != nil || x.Refund.Outcome != ledgerdb.Applied {
		t.Fatalf("refunding %s: %v (%s)", x.Job, err, x.Refund.Outcome)
	}
	if tr, err := s.Refund(ctx, x.Kept, ledgerdb.ReasonGPUFailed, "", 1); err != nil || tr.Outcome != ledgerdb.Applied {
		t.Fatalf("refunding %s: %v (%s)", x.Kept, err, tr.Outcome)
	}
	RequireBalance(t, s, x.Account, 100)
	return x
}
