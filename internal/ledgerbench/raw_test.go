package ledgerbench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// rawStatements are the SQL statements of a lifecycle's pgbench script, in order, with the job's
// key as $1 and, in settle.sql, the units used as $2, so that a test can run them one by one.
func rawStatements(t *testing.T, last string) []string {
	t.Helper()
	const key = ":accounts_prefix::text || :acct::text || '/' || :run::text || '-' || :client_id::text || '-' || :n::text"
	var stmts []string
	var cur []string
	for _, line := range strings.Split(rawScript(last), "\n") {
		if cur == nil && !strings.HasPrefix(line, "WITH ") {
			continue
		}
		cur = append(cur, line)
		if strings.HasSuffix(line, ";") {
			stmt := strings.ReplaceAll(strings.Join(cur, "\n"), key, "$1::text")
			stmts = append(stmts, strings.ReplaceAll(stmt, ":used::bigint", "$2::bigint"))
			cur = nil
		}
	}
	if len(stmts) != TransitionsPerLifecycle {
		t.Fatalf("found %d statements in the metered script, want %d", len(stmts), TransitionsPerLifecycle)
	}
	return stmts
}

// TestRawStatementsMoveBlocksAsTheFunctions holds the raw statements to the ledger functions'
// block rules where the benchmark's runs never go, on an account with a promotional block of 300
// credits and a paid one of 7,000: job A is charged its hold of 7,200 (300 from the promotional
// block, spent first, then 6,900 from the paid one), refunded (back to those blocks, the last
// drawn first), then job B is charged 7,200 and leaves the blocks 100, and A's late result is
// settled at 1,000 of its 3,600 seconds: the reclaim draws the 100 and the other 7,100 on the
// debt (the debt rule: a reclaim is never refused), and the release gives its 5,200 back to what
// the reclaim drew, the debt first. The raw statements and the functions must move the same
// credits between the same blocks in the same order, and each account pass the audit.
func TestRawStatementsMoveBlocksAsTheFunctions(t *testing.T) {
	ctx := context.Background()
	pool := ledgertest.OwnerPool(t)
	store := ledgerdb.New(pool)
	price, _, err := store.SetPrice(ctx, meteredPrice)
	if err != nil {
		t.Fatal(err)
	}
	stmts := rawStatements(t, settleScript)
	grants := []grant{
		{key: "paid", category: ledgerdb.CategoryPaid, amount: 7000},
		{key: "promotional", category: ledgerdb.CategoryPromotional, amount: 300, expiresIn: 365 * 24 * time.Hour},
	}
	const used = 1000

	type step struct {
		kind  string
		block string // the block's grant key; "debt" for the debt
		move  int64
	}
	walk := func(side string, transition func(i int, job ledgerdb.JobKey) error) []step {
		account := newPrefix() + "-" + side
		a := ledgerdb.JobKey{AccountID: account, JobID: "a"}
		b := ledgerdb.JobKey{AccountID: account, JobID: "b"}
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			if err := fund(ctx, tx, []string{account}, grants); err != nil {
				return err
			}
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"}, jobColumns, pgx.CopyFromRows([][]any{jobRow(a, price), jobRow(b, price)}))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		// charge A, refund A, charge B, settle A: the statements' indexes in the script.
		for _, s := range []struct {
			stmt int
			job  ledgerdb.JobKey
		}{{0, a}, {1, a}, {0, b}, {3, a}} {
			if err := transition(s.stmt, s.job); err != nil {
				t.Fatalf("side %s, statement %d on job %s: %v", side, s.stmt, s.job, err)
			}
		}
		rows, err := pool.Query(ctx, `
			SELECT e.kind, coalesce(b.idempotency_key, CASE WHEN m.block_id IS NULL THEN 'debt' ELSE 'opening' END), m.amount
			FROM ledger_block_moves m JOIN ledger_entries e ON e.id = m.entry_id LEFT JOIN credit_blocks b ON b.id = m.block_id
			WHERE m.account_id = $1 AND e.kind <> 'grant' ORDER BY m.id`, account)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (step, error) {
			var s step
			return s, r.Scan(&s.kind, &s.block, &s.move)
		})
		if err != nil {
			t.Fatal(err)
		}
		if report, err := store.Audit(ctx, account); err != nil || !report.OK() {
			t.Errorf("side %s: audit %v, %v", side, report.Violations, err)
		}
		return steps
	}

	raw := walk(sideRaw, func(i int, job ledgerdb.JobKey) error {
		args := []any{job.String()}
		if i == 3 {
			args = append(args, used)
		}
		tag, err := pool.Exec(ctx, stmts[i], args...)
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("the statement wrote no block move")
		}
		return err
	})
	goSide := walk(sideGo, func(i int, job ledgerdb.JobKey) error {
		var tr ledgerdb.Transition
		var err error
		switch i {
		case 0:
			tr, err = store.Charge(ctx, job)
		case 1:
			tr, err = store.Refund(ctx, job, ledgerdb.ReasonGPUFailed, "bench: work failed", 3)
		case 3:
			tr, err = store.Settle(ctx, job, 3, ledgerdb.Units(used), "")
		}
		if err == nil && tr.Outcome != ledgerdb.Applied {
			err = fmt.Errorf("outcome %s", tr.Outcome)
		}
		return err
	})
	want := []step{
		{"charge", "promotional", -300}, {"charge", "paid", -6900},
		{"refund", "paid", 6900}, {"refund", "promotional", 300},
		{"charge", "promotional", -300}, {"charge", "paid", -6900},
		{"reclaim", "paid", -100}, {"reclaim", "debt", -7100},
		{"release", "debt", 5200},
	}
	if !slices.Equal(goSide, want) {
		t.Errorf("the functions moved %v, want %v", goSide, want)
	}
	if !slices.Equal(raw, want) {
		t.Errorf("the raw statements moved %v, want %v (as the functions)", raw, want)
	}
}
