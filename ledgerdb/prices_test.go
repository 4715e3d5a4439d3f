package ledgerdb_test

// Prices set by the server: the price list's versions, setting a price from many sessions at once,
// and the prices it refuses — against the real Postgres, as the application role.

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestPriceVersioning checks the price-list rule (amounts come from the job record, fixed at
// submission) and the remembered-IDs and idempotent-doors rules across a price change: a job keeps
// the version, unit price, hold and cost it was submitted at; a job submitted after the change gets
// the new price; the same ID resubmitted after the change answers the original job at its old price
// (with the kind's maximum of the version it was submitted at, not today's); its charge, settlement
// and release move the old price's amounts. Setting the same figures again answers AlreadyApplied
// and writes no version; setting an older price again writes a new version.
func TestPriceVersioning(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.OwnKind(t)
	acct := ledgertest.Account(t, s, 10_000)

	v1, outcome, err := s.SetPrice(ctx, ledgerdb.Price{Kind: kind, Unit: ledgerdb.UnitGPUSecond, UnitPrice: 3, MaxUnits: 100, Memo: "launch price"})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, outcome)
	require.Equal(t, 1, v1.Version)
	require.Equal(t, "launch price", v1.Memo)
	require.Equal(t, int64(300), v1.Hold())

	first := ledgerdb.Submission{JobID: ledgertest.ID(t, "first"), AccountID: acct, Kind: kind, Request: []byte(`{"render":"a"}`)}
	tr, err := s.Submit(ctx, first)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	require.Equal(t, 1, tr.Job.PriceVersion)
	require.Equal(t, int64(300), tr.Job.Cost)

	v2, outcome, err := s.SetPrice(ctx, ledgerdb.Price{Kind: kind, Unit: ledgerdb.UnitGPUSecond, UnitPrice: 5, MaxUnits: 50, Memo: "dearer, shorter"})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, outcome)
	require.Equal(t, 2, v2.Version)

	second := ledgerdb.Submission{JobID: ledgertest.ID(t, "second"), AccountID: acct, Kind: kind, Request: []byte(`{"render":"b"}`)}
	tr, err = s.Submit(ctx, second)
	require.NoError(t, err)
	require.Equal(t, 2, tr.Job.PriceVersion)
	require.Equal(t, int64(5), tr.Job.UnitPrice)
	require.Equal(t, int64(50), tr.Job.HeldUnits)
	require.Equal(t, int64(250), tr.Job.Cost)

	// The first job, resubmitted after the change, is the job it was: its price, not today's.
	for name, sub := range map[string]ledgerdb.Submission{
		"as first sent":                      first,
		"naming the hold of its own version": {JobID: first.JobID, AccountID: acct, Kind: kind, MaxUnits: 100, Request: first.Request},
	} {
		again, err := s.Submit(ctx, sub)
		require.NoError(t, err, name)
		require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome, name)
		require.Equal(t, 1, again.Job.PriceVersion, name)
		require.Equal(t, int64(3), again.Job.UnitPrice, name)
		require.Equal(t, int64(100), again.Job.HeldUnits, name)
		require.Equal(t, int64(300), again.Job.Cost, name)
	}
	_, err = s.Submit(ctx, ledgerdb.Submission{JobID: first.JobID, AccountID: acct, Kind: kind, MaxUnits: 50, Request: first.Request})
	require.ErrorIs(t, err, ledgerdb.ErrConflict, "today's maximum holds other units than the job's")

	charged, err := s.Charge(ctx, first.Key())
	require.NoError(t, err)
	require.Equal(t, int64(10_000-300), charged.BalanceAfter)
	settled, err := s.Settle(ctx, first.Key(), 1, ledgerdb.Units(10), "")
	require.NoError(t, err)
	requireSettled(t, settled.Job, 10)
	ledgertest.RequireRowAmounts(t, s, first.Key(),
		ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -300}, ledgertest.Row{Kind: ledgerdb.KindRelease, Amount: 270})

	// The same figures again write nothing, whatever the memo says.
	same, outcome, err := s.SetPrice(ctx, ledgerdb.Price{Kind: kind, Unit: ledgerdb.UnitGPUSecond, UnitPrice: 5, MaxUnits: 50, Memo: "said again"})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, outcome)
	require.Equal(t, 2, same.Version)
	require.Equal(t, "dearer, shorter", same.Memo, "the answer is the version that stands")
	history, err := s.PriceHistory(ctx, kind)
	require.NoError(t, err)
	require.Len(t, history, 2)

	// Back to the launch price: a new version, not the old one again.
	v3, outcome, err := s.SetPrice(ctx, ledgerdb.Price{Kind: kind, Unit: ledgerdb.UnitGPUSecond, UnitPrice: 3, MaxUnits: 100})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, outcome)
	require.Equal(t, 3, v3.Version)
	current, err := s.CurrentPrice(ctx, kind)
	require.NoError(t, err)
	require.Equal(t, 3, current.Version)
	history, err = s.PriceHistory(ctx, kind)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3}, []int{history[0].Version, history[1].Version, history[2].Version})
	require.Equal(t, []int64{3, 5, 3}, []int64{history[0].UnitPrice, history[1].UnitPrice, history[2].UnitPrice})
	list, err := s.Prices(ctx)
	require.NoError(t, err)
	found := false
	for _, p := range list {
		if p.Kind == kind {
			found = true
			require.Equal(t, 3, p.Version, "the price list shows each kind's latest version")
		}
	}
	require.True(t, found, "kind %s is not on the price list", kind)

	// The second job was submitted under version 2 and stays there.
	job, err := s.Job(ctx, second.Key())
	require.NoError(t, err)
	require.Equal(t, 2, job.PriceVersion)
	require.Equal(t, int64(250), job.Cost)
	ledgertest.RequireBalance(t, s, acct, 10_000-30)
}

// TestSetPriceConcurrently checks the idempotent-doors rule for the price list: the same price set
// by many callers at once writes exactly one version (one Applied, the rest AlreadyApplied), and
// different prices set at once take the versions 1..n, each exactly once, with no gap.
func TestSetPriceConcurrently(t *testing.T) {
	const callers = 12
	ctx := context.Background()
	s := ledgertest.Store(t)

	kind := ledgertest.OwnKind(t)
	outcomes := make([]ledgerdb.Outcome, callers)
	errs := make([]error, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			_, outcomes[i], errs[i] = s.SetPrice(ctx, ledgerdb.Price{Kind: kind, Unit: ledgerdb.UnitGPUSecond, UnitPrice: 2, MaxUnits: 30})
		})
	}
	close(start)
	wg.Wait()
	applied := 0
	for i := range callers {
		require.NoError(t, errs[i])
		if outcomes[i] == ledgerdb.Applied {
			applied++
		} else {
			require.Equal(t, ledgerdb.AlreadyApplied, outcomes[i])
		}
	}
	require.Equal(t, 1, applied, "outcomes %v", outcomes)
	history, err := s.PriceHistory(ctx, kind)
	require.NoError(t, err)
	require.Len(t, history, 1)

	kind = ledgertest.OwnKind(t)
	prices := make([]ledgerdb.Price, callers)
	start = make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			prices[i], outcomes[i], errs[i] = s.SetPrice(ctx, ledgerdb.Price{Kind: kind, Unit: ledgerdb.UnitGPUSecond, UnitPrice: int64(i + 1), MaxUnits: 30})
		})
	}
	close(start)
	wg.Wait()
	versions := map[int]int64{}
	for i := range callers {
		require.NoError(t, errs[i])
		require.Equal(t, ledgerdb.Applied, outcomes[i])
		_, dup := versions[prices[i].Version]
		require.False(t, dup, "two prices took version %d", prices[i].Version)
		versions[prices[i].Version] = prices[i].UnitPrice
	}
	history, err = s.PriceHistory(ctx, kind)
	require.NoError(t, err)
	require.Len(t, history, callers)
	for i, p := range history {
		require.Equal(t, i+1, p.Version)
		require.Equal(t, versions[p.Version], p.UnitPrice)
	}
}

// TestBadPricesAreRefused checks the price list's input (the price-list rule: what a job costs
// comes from a price that makes sense): a unit price of zero, below zero, above MaxAmount, or whose
// hold (unit price × max units) is above MaxAmount; a kind sold by the job with a maximum other
// than 1; a maximum of units below 1 or above ledgerdb.MaxUnits; an unknown unit; a kind name in
// upper case, with other characters, starting with a digit or too long; a bad memo. Each is an
// InvalidInputError naming the field, and no version is written. The database's constraints
// refuse the same prices when the function is called directly. The largest allowed holds pass.
func TestBadPricesAreRefused(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.OwnKind(t)
	job, gpu := ledgerdb.UnitJob, ledgerdb.UnitGPUSecond
	for name, c := range map[string]struct {
		price ledgerdb.Price
		field string
	}{
		"unit price zero":            {ledgerdb.Price{Unit: job, UnitPrice: 0, MaxUnits: 1}, "unit price"},
		"unit price negative":        {ledgerdb.Price{Unit: gpu, UnitPrice: -1, MaxUnits: 10}, "unit price"},
		"unit price min int64":       {ledgerdb.Price{Unit: job, UnitPrice: math.MinInt64, MaxUnits: 1}, "unit price"},
		"unit price over the cap":    {ledgerdb.Price{Unit: job, UnitPrice: ledgerdb.MaxAmount + 1, MaxUnits: 1}, "unit price"},
		"hold over the cap":          {ledgerdb.Price{Unit: gpu, UnitPrice: ledgerdb.MaxAmount/1000 + 1, MaxUnits: 1000}, "unit price"},
		"hold overflows int64":       {ledgerdb.Price{Unit: gpu, UnitPrice: math.MaxInt64 / 2, MaxUnits: 3}, "unit price"},
		"largest price, 2 units":     {ledgerdb.Price{Unit: gpu, UnitPrice: ledgerdb.MaxAmount, MaxUnits: 2}, "unit price"},
		"job unit, 2 units":          {ledgerdb.Price{Unit: job, UnitPrice: 5, MaxUnits: 2}, "max units"},
		"job unit, 0 units":          {ledgerdb.Price{Unit: job, UnitPrice: 5, MaxUnits: 0}, "max units"},
		"gpu seconds, 0 units":       {ledgerdb.Price{Unit: gpu, UnitPrice: 5, MaxUnits: 0}, "max units"},
		"gpu seconds, -1 units":      {ledgerdb.Price{Unit: gpu, UnitPrice: 5, MaxUnits: -1}, "max units"},
		"gpu seconds, over MaxUnits": {ledgerdb.Price{Unit: gpu, UnitPrice: 1, MaxUnits: ledgerdb.MaxUnits + 1}, "max units"},
		"unknown unit":               {ledgerdb.Price{Unit: "second", UnitPrice: 5, MaxUnits: 1}, "unit"},
		"empty unit":                 {ledgerdb.Price{Unit: "", UnitPrice: 5, MaxUnits: 1}, "unit"},
		"unit in upper case":         {ledgerdb.Price{Unit: "GPU_SECOND", UnitPrice: 5, MaxUnits: 1}, "unit"},
		"memo with NUL":              {ledgerdb.Price{Unit: job, UnitPrice: 5, MaxUnits: 1, Memo: "a\x00b"}, "memo"},
		"memo too long":              {ledgerdb.Price{Unit: job, UnitPrice: 5, MaxUnits: 1, Memo: strings.Repeat("m", ledgerdb.MaxTextLength+1)}, "memo"},
		"memo not UTF-8":             {ledgerdb.Price{Unit: job, UnitPrice: 5, MaxUnits: 1, Memo: "bad\xff"}, "memo"},
	} {
		c.price.Kind = kind
		_, _, err := s.SetPrice(ctx, c.price)
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, name)
		var invalid *ledgerdb.InvalidInputError
		require.ErrorAs(t, err, &invalid, name)
		require.Equal(t, c.field, invalid.Field, "%s: %v", name, err)
	}
	_, err := s.PriceHistory(ctx, kind)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownKind, "no bad price was written")

	for name, bad := range map[string]string{
		"empty":             "",
		"upper case":        "Render",
		"all upper case":    "RENDER",
		"space":             "render 4k",
		"slash":             "render/4k",
		"colon":             "render:4k",
		"starts with digit": "4k-render",
		"starts with dash":  "-render",
		"starts with dot":   ".render",
		"unicode":           "rénder",
		"fullwidth":         "ｒender",
		"newline":           "render\n",
		"NUL":               "render\x00",
		"too long":          strings.Repeat("a", 65),
	} {
		_, _, err := s.SetPrice(ctx, ledgerdb.Price{Kind: bad, Unit: job, UnitPrice: 5, MaxUnits: 1})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "kind %s", name)
		require.ErrorContains(t, err, "kind", name)
		_, err = s.CurrentPrice(ctx, bad)
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "kind %s", name)
		_, err = s.Submit(ctx, ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: ledgertest.ID(t, "acct"), Kind: bad})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "kind %s", name)
	}
	require.NoError(t, ledgerdb.ValidateKind(strings.Repeat("a", 64)), "64 characters is the longest kind")

	// The database refuses the same prices on its own, whoever calls the function.
	for name, args := range map[string][]any{
		"unit price zero":   {kind, "job", int64(0), int64(1)},
		"hold over the cap": {kind, "gpu_second", ledgerdb.MaxAmount, int64(2)},
		"job unit, 2 units": {kind, "job", int64(5), int64(2)},
		"no units":          {kind, "gpu_second", int64(5), int64(0)},
		"unknown unit":      {kind, "second", int64(5), int64(1)},
		"upper case kind":   {"Render", "job", int64(5), int64(1)},
		"unicode kind":      {"rénder", "job", int64(5), int64(1)},
		"kind too long":     {strings.Repeat("a", 65), "job", int64(5), int64(1)},
	} {
		_, err := s.Pool().Exec(ctx, `SELECT ledger_set_price($1, $2, $3, $4, '')`, args...)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, name)
		// A CHECK violation; a maximum of 0 units meets prices_hold_bounded's division first
		// (division_by_zero), which refuses it all the same.
		require.Contains(t, []string{"23514", "22012"}, pgErr.Code, "%s: %s", name, pgErr.Message)
		require.True(t, ledgerdb.Permanent(err), name)
	}
	_, err = s.PriceHistory(ctx, kind)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownKind, "no bad price was written")

	// The largest holds allowed pass.
	for _, p := range []ledgerdb.Price{
		{Kind: ledgertest.OwnKind(t), Unit: job, UnitPrice: ledgerdb.MaxAmount, MaxUnits: 1},
		{Kind: ledgertest.OwnKind(t), Unit: gpu, UnitPrice: ledgerdb.MaxAmount / ledgerdb.MaxUnits, MaxUnits: ledgerdb.MaxUnits},
		{Kind: ledgertest.OwnKind(t), Unit: gpu, UnitPrice: ledgerdb.MaxAmount / 2, MaxUnits: 2},
	} {
		got, outcome, err := s.SetPrice(ctx, p)
		require.NoError(t, err, "%+v", p)
		require.Equal(t, ledgerdb.Applied, outcome)
		require.LessOrEqual(t, got.Hold(), ledgerdb.MaxAmount)
	}
}
