package ledgerdb_test

// The grant's doors: ledger_post and ledger_settle_pending_grant called as the application role
// may call them, the terms a grant's block is refused for, a pending grant's key and its payment
// confirmed after its expiry, and the cost basis at the Go door.

import (
	"context"
	"errors"
	"math/big"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// rawPost is one call of ledger_post's eleven arguments, in order; nil is SQL NULL.
type rawPost struct {
	account, kind          any
	amount                 any
	key, memo, category    any
	priority               any
	effectiveAt, expiresAt any
	costBasis              any
	pending                any
}

// call calls ledger_post with the call's arguments, as the application role, and answers its
// outcome.
func (p rawPost) call(ctx context.Context, s *ledgerdb.Store) (string, error) {
	var outcome string
	err := s.Pool().QueryRow(ctx, `SELECT outcome FROM ledger_post($1::text, $2::text, $3::bigint, $4::text, $5::text,
		$6::text, $7::integer, $8::timestamptz, $9::timestamptz, $10::numeric, $11::boolean)`,
		p.account, p.kind, p.amount, p.key, p.memo, p.category, p.priority, p.effectiveAt, p.expiresAt, p.costBasis, p.pending).Scan(&outcome)
	return outcome, err
}

// requireRefusedArgument checks that err is the ledger functions' refusal of an argument, naming
// field; what says what was refused, for the failure's message.
func requireRefusedArgument(t *testing.T, err error, field, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, what)
	require.Equal(t, "JB004", pgErr.Code, "%s: %s", what, pgErr.Message)
	require.Equal(t, field, pgErr.ColumnName, "%s: %s", what, pgErr.Message)
	require.NotEmpty(t, pgErr.Message)
}

// TestLedgerPostRefusesWhatItCannotStandBehind checks ledger_post as a door of its own (the
// application role may call it without the Go code in front): a grant whose expiry is not after
// its start, one whose expiry has already passed (it could only lapse, and must not pay a debt),
// a NULL kind, amount, key, pending flag, category or priority, an amount of the wrong sign, and a
// cost basis that is not a finite non-negative decimal the block stores exactly — each is refused
// with SQLSTATE JB004 naming the argument, and nothing is written: the account's debt stays
// unpaid, no row, no block.
func TestLedgerPostRefusesWhatItCannotStandBehind(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	owe(t, s, acct, 50)
	pendingKey := ledgertest.ID(t, "pending")
	_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: pendingKey, Pending: true})
	require.NoError(t, err)
	rowsBefore, blocksBefore := accountRows(t, s, acct), remaining(t, s, acct)

	now := ledgertest.Now(t, s)
	hourAgo, twoHoursAgo := now.Add(-time.Hour), now.Add(-2*time.Hour)
	inAnHour, inTwoHours := now.Add(time.Hour), now.Add(2*time.Hour)
	grant := func(change func(*rawPost)) rawPost {
		p := rawPost{account: acct, kind: "grant", amount: int64(100), key: ledgertest.ID(t, "bad"), memo: "refused",
			category: "paid", priority: int32(0), pending: false}
		change(&p)
		return p
	}
	for _, tc := range []struct {
		name  string
		post  rawPost
		field string
	}{
		{"no kind", grant(func(p *rawPost) { p.kind = nil }), "kind"},
		{"a kind ledger_post does not write", grant(func(p *rawPost) { p.kind, p.amount = "charge", int64(-10) }), "kind"},
		{"no amount", grant(func(p *rawPost) { p.amount = nil }), "amount"},
		{"a grant of nothing", grant(func(p *rawPost) { p.amount = int64(0) }), "amount"},
		{"a negative grant", grant(func(p *rawPost) { p.amount = int64(-5) }), "amount"},
		{"an adjustment of nothing", grant(func(p *rawPost) { p.kind, p.amount = "adjustment", int64(0) }), "amount"},
		{"no key", grant(func(p *rawPost) { p.key = nil }), "key"},
		{"no pending flag", grant(func(p *rawPost) { p.pending = nil }), "pending"},
		{"no pending flag on a pending grant's retry", grant(func(p *rawPost) { p.key, p.pending = pendingKey, nil }), "pending"},
		{"no category", grant(func(p *rawPost) { p.category = nil }), "category"},
		{"an unknown category", grant(func(p *rawPost) { p.category = "gift" }), "category"},
		{"no priority", grant(func(p *rawPost) { p.priority = nil }), "priority"},
		{"an expiry before the start", grant(func(p *rawPost) { p.effectiveAt, p.expiresAt = inTwoHours, inAnHour }), "expires_at"},
		{"an expiry at the start", grant(func(p *rawPost) { p.effectiveAt, p.expiresAt = inAnHour, inAnHour }), "expires_at"},
		{"a start and an expiry both past", grant(func(p *rawPost) { p.effectiveAt, p.expiresAt = twoHoursAgo, hourAgo }), "expires_at"},
		{"an expiry past, the start now", grant(func(p *rawPost) { p.expiresAt = hourAgo }), "expires_at"},
		{"a pending grant whose expiry passed", grant(func(p *rawPost) { p.expiresAt, p.pending = hourAgo, true }), "expires_at"},
		{"a negative cost basis", grant(func(p *rawPost) { p.costBasis = "-0.01" }), "cost_basis"},
		{"a cost basis NaN", grant(func(p *rawPost) { p.costBasis = "NaN" }), "cost_basis"},
		{"a cost basis Infinity", grant(func(p *rawPost) { p.costBasis = "Infinity" }), "cost_basis"},
		{"a cost basis finer than the block stores", grant(func(p *rawPost) { p.costBasis = "1e-19" }), "cost_basis"},
		{"a cost basis with 23 decimals", grant(func(p *rawPost) { p.costBasis = "3.3333333333333335e-07" }), "cost_basis"},
		{"a cost basis larger than the block stores", grant(func(p *rawPost) { p.costBasis = "1e20" }), "cost_basis"},
		{"a cost basis on promotional credits", grant(func(p *rawPost) { p.category, p.costBasis = "promotional", "0.01" }), "cost_basis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outcome, err := tc.post.call(ctx, s)
			requireRefusedArgument(t, err, tc.field, "answered "+outcome)
		})
	}
	require.Equal(t, rowsBefore, accountRows(t, s, acct), "a refused post writes no row")
	require.Equal(t, blocksBefore, remaining(t, s, acct), "a refused post makes no block and pays no debt")
	ledgertest.RequireBalance(t, s, acct, -50)

	// Through the Go code, the same refusal is an *InvalidInputError naming the field.
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: ledgertest.ID(t, "lapsed"),
		Block: ledgerdb.BlockTerms{EffectiveAt: &twoHoursAgo, ExpiresAt: &hourAgo}})
	var invalid *ledgerdb.InvalidInputError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "expires_at", invalid.Field)
	requireBalanceSound(t, s, acct, -50)
}

// TestGrantStartedInThePastIsSpendableAtOnce checks a grant whose start is past and whose expiry
// is ahead (a yearly plan granted a day late): it is accepted as any grant is, pays the account's
// debt first, and what is left is spendable at once, until its expiry.
func TestGrantStartedInThePastIsSpendableAtOnce(t *testing.T) {
	s, acct := blockStore(t)
	owe(t, s, acct, 30)
	yesterday, nextYear := time.Now().Add(-24*time.Hour), time.Now().Add(365*24*time.Hour)
	b := ledgertest.GrantBlock(t, s, acct, 100, ledgerdb.BlockTerms{EffectiveAt: &yesterday, ExpiresAt: &nextYear})
	require.Equal(t, int64(70), b.Remaining, "the debt of 30 paid first")
	require.True(t, b.Spendable(time.Now()))
	_, tr := chargeJob(t, s, acct, 70)
	require.Equal(t, ledgerdb.StateRunning, tr.Job.State, "the block pays for a job at once")
	requireBalanceSound(t, s, acct, 0)
}

// TestRetryOfAGrantAfterItsExpiryAnswersTheGrant checks the idempotent-doors rule across a block's
// expiry: a grant retried with the same key and terms after its block's expiry has passed answers
// the original grant (already_applied, its row), not a refusal of an expiry in the past — the
// retry asks nothing new, and its caller must learn that the first call bought the credits.
func TestRetryOfAGrantAfterItsExpiryAnswersTheGrant(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	key := ledgertest.ID(t, "invoice")
	inAnHour := time.Now().Add(time.Hour)
	first, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: key, Block: ledgerdb.BlockTerms{ExpiresAt: &inAnHour, CostBasis: "0.01"}})
	require.NoError(t, err)
	// The block's clock moves on: its expiry is an hour past.
	var expired time.Time
	require.NoError(t, ledgertest.OwnerPool(t).QueryRow(ctx, `UPDATE credit_blocks SET effective_at = now() - interval '2 hours',
		expires_at = now() - interval '1 hour' WHERE account_id = $1 AND idempotency_key = $2 RETURNING expires_at`, acct, key).Scan(&expired))

	again, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: key, Block: ledgerdb.BlockTerms{ExpiresAt: &expired, CostBasis: "0.01"}})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Equal(t, first.EntryID, again.EntryID)
	ledgertest.RequireBalance(t, s, acct, 100)
}

// TestSettlePendingGrantRefusesNoAnswer checks ledger_settle_pending_grant as a door of its own: a
// NULL p_paid says neither that the payment was made nor that it failed, so it is refused with
// SQLSTATE JB004 naming paid, and the grant stays pending: no row, no credits.
func TestSettlePendingGrantRefusesNoAnswer(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	key := ledgertest.ID(t, "topup")
	_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: key, Pending: true, Block: paid})
	require.NoError(t, err)

	var outcome string
	err = s.Pool().QueryRow(ctx, `SELECT outcome FROM ledger_settle_pending_grant($1, $2, NULL)`, acct, key).Scan(&outcome)
	requireRefusedArgument(t, err, "paid", "answered "+outcome)
	ledgertest.RequireBalance(t, s, acct, 0)
	require.Empty(t, accountRows(t, s, acct), "no row")
	blocks, err := s.Blocks(ctx, acct)
	require.NoError(t, err)
	for _, b := range blocks {
		if b.Key == key {
			require.Equal(t, ledgerdb.BlockPending, b.Status)
		}
	}
}

// TestCostBasisIsStoredExactlyOrRefused checks the cost basis at the Go door, written as people
// and programs write decimals (Python's str of a float, JavaScript's String, a Decimal's "1E+1"):
// what the block can store exactly — at most 18 decimals, below 10^20 — is stored exactly, and its
// retry with the same written form answers the first grant (the idempotent-doors rule); anything
// else — a fraction, hex, more decimals than stored, a negative, NaN, Infinity, an oversized
// value, an empty exponent — is an *InvalidInputError naming cost_basis, with nothing written.
func TestCostBasisIsStoredExactlyOrRefused(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	for _, tc := range []struct{ written, stored string }{
		{"0.01", "0.01"},
		{"0.0100", "0.01"},
		{"1e-11", "0.00000000001"},
		{"1E+1", "10"},
		{"3.33333333333e-07", "0.000000333333333333"},
		{"0.000000333333333333", "0.000000333333333333"},
		{"99999999999999999999.999999999999999999", "99999999999999999999.999999999999999999"},
		{"0", "0"},
	} {
		credit := ledgerdb.Credit{AccountID: acct, Amount: 10, Key: ledgertest.ID(t, "paid"), Block: ledgerdb.BlockTerms{CostBasis: tc.written}}
		first, err := s.Grant(ctx, credit)
		require.NoError(t, err, tc.written)
		again, err := s.Grant(ctx, credit)
		require.NoError(t, err, "the retry of %s", tc.written)
		require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome, tc.written)
		require.Equal(t, first.EntryID, again.EntryID, tc.written)
		require.Equal(t, tc.stored, ledgertest.BlockOfKey(t, s, acct, credit.Key).CostBasis, tc.written)
	}

	rowsBefore, blocksBefore := accountRows(t, s, acct), remaining(t, s, acct)
	for _, written := range []string{
		"1/3", "0x10/1", "0x10", "3.3333333333333335e-07", "1e-19", "0.0000000000000000001", "-0.01", "-0", "NaN", "nan",
		"Infinity", "inf", "1e20", "100000000000000000000", "1e999999999999999999999", "1e", " 0.01", "0.01 ", "+0.01",
		".5", "5.", "1_000", "0,01", "١",
	} {
		_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 10, Key: ledgertest.ID(t, "bad"), Block: ledgerdb.BlockTerms{CostBasis: written}})
		var invalid *ledgerdb.InvalidInputError
		require.ErrorAs(t, err, &invalid, "%q", written)
		require.Equal(t, "cost_basis", invalid.Field, "%q", written)
		require.False(t, errors.Is(err, ledgerdb.ErrBalanceOutOfRange), "%q is no matter of the balance", written)
	}
	require.Equal(t, rowsBefore, accountRows(t, s, acct), "a refused cost basis writes no row")
	require.Equal(t, blocksBefore, remaining(t, s, acct), "a refused cost basis makes no block")
	ledgertest.RequireSound(t, s, acct)
}

// TestGrantTermsRefused checks the door of a grant: terms that cannot make a block (an unknown
// category, an expiry in the past or before the start, a cost on promotional credits, a cost that
// is not a decimal) are refused with nothing written, and the same key with other terms is a
// conflict (the idempotent-doors rule).
func TestGrantTermsRefused(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	past := time.Now().Add(-time.Hour)
	soon := time.Now().Add(time.Hour)
	later := time.Now().Add(2 * time.Hour)
	for _, terms := range []ledgerdb.BlockTerms{
		{Category: "gift"},
		{ExpiresAt: &past},
		{EffectiveAt: &later, ExpiresAt: &soon},
		{Category: ledgerdb.CategoryPromotional, CostBasis: "0.01"},
		{CostBasis: "a penny"},
		{CostBasis: "-1"},
	} {
		_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 10, Key: ledgertest.ID(t, "bad"), Block: terms})
		var invalid *ledgerdb.InvalidInputError
		require.ErrorAs(t, err, &invalid, "%+v", terms)
	}
	ledgertest.RequireBalance(t, s, acct, 0)
	blocks, err := s.Blocks(ctx, acct)
	require.NoError(t, err)
	require.Len(t, blocks, 1, "only the opening block")

	key := ledgertest.ID(t, "grant")
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 10, Key: key, Block: promotional(3)})
	require.NoError(t, err)
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 10, Key: key, Block: paid})
	require.ErrorIs(t, err, ledgerdb.ErrConflict)
	ledgertest.RequireBalance(t, s, acct, 10)
}

// TestPendingGrantSettledAfterItsExpiryIsVoid checks a payment confirmed only after the block it
// pays for has expired: the block is void (marked expired, with no row: it held nothing), no row
// is written and no credits appear (nor pay a debt): the credits would lapse at once, and paying
// a debt with them would spend credits after their expiry. The answer says so, ErrGrantExpired —
// not a refusal of the request as if nothing had happened — and so does every later confirmation
// of the payment: it was not "settled the other way" before. A later failed payment finds the
// block void, as it asks: already applied.
func TestPendingGrantSettledAfterItsExpiryIsVoid(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	owe(t, s, acct, 30)
	expires := time.Now().Add(time.Hour)
	key := ledgertest.ID(t, "late-payment")
	_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: key, Pending: true,
		Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, ExpiresAt: &expires}})
	require.NoError(t, err)
	_, err = ledgertest.OwnerPool(t).Exec(ctx, `UPDATE credit_blocks SET effective_at = now() - interval '2 hours',
		expires_at = now() - interval '1 hour' WHERE account_id = $1 AND idempotency_key = $2`, acct, key)
	require.NoError(t, err)
	rowsBefore := accountRows(t, s, acct)

	for range 2 {
		_, err = s.SettlePendingGrant(ctx, acct, key, true)
		require.ErrorIs(t, err, ledgerdb.ErrGrantExpired)
		require.NotErrorIs(t, err, ledgerdb.ErrConflict)
		require.NotErrorIs(t, err, ledgerdb.ErrInvalidInput)
	}
	failed, err := s.SettlePendingGrant(ctx, acct, key, false)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, failed.Outcome)
	require.Equal(t, rowsBefore, accountRows(t, s, acct), "no row")
	ledgertest.RequireBalance(t, s, acct, -30)
	b := ledgertest.BlockOfKey(t, s, acct, key)
	require.Equal(t, ledgerdb.BlockVoid, b.Status)
	require.Zero(t, b.Remaining)
	require.NotNil(t, b.ExpiredAt, "marked expired")
	ledgertest.RequireSound(t, s, acct)
}

// TestKeyOfAVoidOrPendingGrantIsNotReused checks the idempotency key of a grant whose payment
// failed (its block void) or is still pending: posting a grant under it again is a conflict, not an
// answer that it was applied — a retried payment under that key would otherwise be told it bought
// credits it never got (the idempotent-doors rule).
func TestKeyOfAVoidOrPendingGrantIsNotReused(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	void, pending := ledgertest.ID(t, "void"), ledgertest.ID(t, "pending")
	for _, key := range []string{void, pending} {
		_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: key, Pending: true})
		require.NoError(t, err)
	}
	_, err := s.SettlePendingGrant(ctx, acct, void, false)
	require.NoError(t, err)
	for _, key := range []string{void, pending} {
		_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: key})
		require.ErrorIs(t, err, ledgerdb.ErrConflict, key)
	}
	p, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: pending, Pending: true})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, p.Outcome, "the same pending grant again")
	ledgertest.RequireBalance(t, s, acct, 0)
}

// FuzzParseCostBasis checks the cost basis's reading against math/big on any text: what it accepts
// is the same number as written (never rounded), in a plain form with at most 18 decimals, below
// 10^20, that reads back as itself; what it refuses is an *InvalidInputError naming cost_basis.
func FuzzParseCostBasis(f *testing.F) {
	for _, seed := range []string{"0.01", "1e-11", "1E+1", "3.3333333333333335e-07", "1/3", "0x10/1", "NaN", "1e20",
		"99999999999999999999.999999999999999999", "0.0100", "00012.3400", "-1", "1e-1048576", ".5", "0e-100"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, written string) {
		plain, err := ledgerdb.ParseCostBasis(written)
		if err != nil {
			var invalid *ledgerdb.InvalidInputError
			if !errors.As(err, &invalid) || invalid.Field != "cost_basis" {
				t.Fatalf("%q refused with %v", written, err)
			}
			return
		}
		want, ok := new(big.Rat).SetString(written)
		got, ok2 := new(big.Rat).SetString(plain)
		if !ok || !ok2 || want.Cmp(got) != 0 {
			t.Fatalf("%q read as %q", written, plain)
		}
		if !regexp.MustCompile(`^(0|[1-9][0-9]{0,19})(\.[0-9]{0,17}[1-9])?$`).MatchString(plain) {
			t.Fatalf("%q read as %q: not a plain decimal of at most 18 decimals below 10^20", written, plain)
		}
		if again, err := ledgerdb.ParseCostBasis(plain); err != nil || again != plain {
			t.Fatalf("%q read as %q, which reads as %q, %v", written, plain, again, err)
		}
	})
}
