package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// TestCreditChecksReportBreaches checks the chaos run's own credit checks on real rows of the
// tests' ledger. A sound account passes them: a promotional block a refund brought credits back
// to after its expiry (they expired at once, in an expire row naming the refund), another that
// the expiry pass emptied with its one expire row, an automatic top-up request paid by its grant
// posted twice under the request's key (bought once: the idempotent-doors rule), a pending grant
// confirmed and one whose payment failed, its audit clean and its revenue reconciling. And each
// rule the run enforces is reported when it is broken: a top-up request nobody paid, a grant under
// a top-up key nobody asked for, a pending grant never settled, and an expired block whose expire
// rows do not account for what it held.
func TestCreditChecksReportBreaches(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	x, rule := creditStory(t, s)
	acct := x.Account
	paidTerms := ledgerdb.BlockTerms{CostBasis: "0.01"}
	r := &run{ledger: s, accounts: []string{acct}, start: time.Now().Add(-time.Hour), credits: &creditMix{
		grants: map[string][]blockGrant{acct: {{key: "pending-paid", amount: 10, pending: true, paid: true}, {key: "pending-failed", amount: 10, pending: true}}},
		rule:   rule, receiver: &topUpReceiver{deliveries: map[string]int{}},
	}}
	checkKinds(t, r, map[invariants.Kind]int{ViolationTopUp: 1, ViolationPendingGrant: 1})

	_, asks, err := r.topUpRequests(ctx)
	must(t, err)
	if len(asks) != 1 || asks[0].Amount != 60 {
		t.Fatalf("top-up requests: %+v, want one of 60 credits", asks)
	}
	for range 2 {
		_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 60, Key: asks[0].IdempotencyKey, Memo: "automatic top-up", Block: paidTerms})
		must(t, err)
	}
	_, err = s.SettlePendingGrant(ctx, acct, "pending-failed", false)
	must(t, err)
	totals := checkKinds(t, r, map[invariants.Kind]int{})
	if totals.TopUpsPaid != 1 || totals.PendingConfirmed != 1 || totals.PendingVoided != 1 || totals.BlocksExpired != 1 ||
		totals.BlocksEmptied != 1 || totals.ReturnExpiries != 1 {
		t.Fatalf("totals of a sound account: %+v", totals)
	}

	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 5, Key: "topup-1", Block: paidTerms})
	must(t, err)
	checkKinds(t, r, map[invariants.Kind]int{ViolationTopUp: 1})
	forgedExpiries(t, r, acct, x.Block)
}

// creditStory writes the sound account of TestCreditChecksReportBreaches but for the breaches it
// starts with — its top-up request unpaid and its failed pending grant not settled yet — and
// answers it with its top-up rule.
func creditStory(t *testing.T, s *ledgerdb.Store) (ledgertest.ExpiredRefund, ledgerdb.TopUpRule) {
	t.Helper()
	ctx := context.Background()
	ws := webhooks.NewStore(s.Pool())
	x := ledgertest.RefundIntoExpiredBlock(t, s) // balance 100
	acct := x.Account
	_, err := ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: "https://hooks.example.com/" + acct}, webhooks.URLPolicy{})
	must(t, err)
	rule := ledgerdb.TopUpRule{AccountID: acct, Threshold: 50, Mode: ledgerdb.TopUpFixed, Amount: 60, MonthlyCap: 100}
	_, err = s.SetTopUpRule(ctx, rule)
	must(t, err)
	lapsing := ledgertest.Promotional(t, s, acct, "lapsing", 5)
	ledgertest.ExpireBlock(t, s, lapsing) // 100 again
	paidTerms := ledgerdb.BlockTerms{CostBasis: "0.01"}
	for _, key := range []string{"pending-paid", "pending-failed"} {
		_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 10, Key: key, Block: paidTerms, Pending: true})
		must(t, err)
	}
	_, err = s.SettlePendingGrant(ctx, acct, "pending-paid", true) // 110
	must(t, err)
	ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 30, "a") // 80
	ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 40, "b") // 40: crosses 50, asks for 60
	must(t, ws.CatchUp(ctx))
	return x, rule
}

// checkKinds runs the credit checks and requires violations of the kinds want, as many of each.
func checkKinds(t *testing.T, r *run, want map[invariants.Kind]int) CreditTotals {
	t.Helper()
	violations, totals, err := r.checkCredits(context.Background())
	must(t, err)
	got := map[invariants.Kind]int{}
	for _, v := range violations {
		got[v.Kind]++
		t.Logf("%s: %s", v.Kind, v.Message)
	}
	if len(got) != len(want) || !mapsEqual(got, want) {
		t.Fatalf("violations by kind: got %v, want %v: %+v", got, want, violations)
	}
	return totals
}

// forgedExpiries shows the check of an expired block, which the ledger's doors cannot break, on
// forged moves: a refund that brought back more than its expiry removed, and two expire rows of
// the pass for a block that needs at most one.
func forgedExpiries(t *testing.T, r *run, acct string, blockID int64) {
	t.Helper()
	ctx := context.Background()
	a, err := r.readCredits(ctx, acct)
	must(t, err)
	block := blockByID(t, a.blocks, blockID)
	moves, err := r.blockMoves(ctx, []int64{blockID})
	must(t, err)
	if p := expiryProblems(a, block, moves[blockID], &CreditTotals{}); len(p) != 0 {
		t.Fatalf("the expired block of a sound account: %v", p)
	}
	into := moves[blockID]
	for entry, amount := range into {
		if a.rows[entry].Kind == ledgerdb.KindRefund {
			into[entry] = amount + 1
		}
	}
	for _, forged := range []int64{1 << 40, 1<<40 + 1} {
		a.rows[forged] = ledgerdb.Entry{ID: forged, Kind: ledgerdb.KindExpire, CreatedAt: time.Now()}
		into[forged] = -1
	}
	problems := strings.Join(expiryProblems(a, block, into, &CreditTotals{}), "; ")
	for _, want := range []string{"brought 16 back", "removed by 2 expire rows"} {
		if !strings.Contains(problems, want) {
			t.Errorf("forged moves: %q does not say %q", problems, want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mapsEqual(a, b map[invariants.Kind]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func blockByID(t *testing.T, blocks []ledgerdb.Block, id int64) ledgerdb.Block {
	t.Helper()
	for _, b := range blocks {
		if b.ID == id {
			return b
		}
	}
	t.Fatalf("no block %d", id)
	return ledgerdb.Block{}
}
