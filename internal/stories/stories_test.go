package stories_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/app"
	"github.com/jobbill/jobbill/internal/stories"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
	"github.com/jobbill/jobbill/worker/workertest"
)

// TestPlayTellsEveryStory plays the stories `make run` shows a newcomer, against a real worker
// on the dev server, the test ledger, the HTTP API and webhook delivery: each story must end as it
// says (delivered, recovered, refunded, delivered once, rejected, the two metered ones settled at
// their usage: 137 and 90 credits, one recovered at 60 after the promotional block it drew from
// expired, and one whose charge asks for an automatic top-up) and the accounts must audit clean —
// no block spent after its expiry — the balance is the sum of its rows, no job holds more than one
// charge, refund, reclaim or release, and each job's rows sum to −(units used × unit price).
// Story (i)'s money is read here from the ledger and the derived events, not from what the story
// says: its charge raised exactly one topup.requested event, the product's payment code bought
// exactly one grant under the event's idempotency key (the event delivered again bought nothing
// twice), whose block holds what it asked and can be spent, and the balance is what it was, less
// the charge, plus the top-up.
func TestPlayTellsEveryStory(t *testing.T) {
	e := workertest.Shared(t, "stories", stories.Configure)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := stories.NewRun()
	// The product reaches jobbill through its HTTP API, over the same ledger and worker.
	srv := httptest.NewServer(api.New(api.Options{Config: e.Config.API, Jobs: e.Jobs, Ledger: e.Store,
		WebhookURLs: webhooks.URLPolicy{AllowPrivate: e.Config.Webhooks.AllowPrivateURLs}}).Handler())
	defer srv.Close()
	// Webhook delivery as a worker process runs it, but claiming only the run's deliveries: other
	// test processes deliver their own accounts' events from the same ledger.
	hooks := app.WebhookOptions(e.Config.Webhooks, e.Store, nil, nil)
	hooks.Accounts = []string{run.Account, run.TopUpAccount}
	hooksCtx, stopHooks := context.WithCancel(ctx)
	delivering := make(chan struct{})
	go func() {
		defer close(delivering)
		_ = webhooks.NewWorker(hooks).Run(hooksCtx)
	}()
	defer func() {
		stopHooks()
		<-delivering
	}()

	var out bytes.Buffer
	err := run.Play(ctx, stories.Services{Ledger: e.Store, Jobs: e.Jobs, TimingOut: e.JobsWith(stories.TimeoutPolicy(e.Config)), API: srv.URL}, &out)
	require.NoError(t, err, out.String())
	for _, line := range []string{
		"(a) success on the first try", "(b) every attempt times out", "(c) every attempt fails",
		"(d) the same result signalled twice", "(e) insufficient credits",
		"(f) metered: 300 credits held, 137 GPU-seconds used", "137 of 300 held credits charged; 163 returned",
		"(g) metered: every attempt times out", "90 of 300 held credits charged; 210 returned",
		"(h) a promotional block expires while a job that drew from it waits for its late result",
		"the late result drew from the paid credits",
		"(i) an automatic top-up", "topup.requested", "signature verified",
		"balance of " + run.TopUpAccount + ": 120 before, 40 charged, 420 topped up, 500 after",
		"audit: every money rule holds",
	} {
		require.Contains(t, out.String(), line)
	}

	// Story (i): one request for the one crossing, asking for what fills 80 up to the target of 500.
	events, err := webhooks.NewStore(e.Store.Pool()).Events(ctx, run.TopUpAccount, 0, 1000)
	require.NoError(t, err)
	type request struct {
		Amount int64  `json:"amount"`
		Key    string `json:"idempotency_key"`
	}
	var requests []request
	for _, ev := range events {
		if ev.Type == "topup.requested" {
			var r request
			require.NoError(t, json.Unmarshal(ev.Data, &r))
			requests = append(requests, r)
		}
	}
	require.Len(t, requests, 1, "one topup.requested for the one crossing")
	require.Equal(t, int64(420), requests[0].Amount)

	// The account's rows: its opening credits, the render's charge, and exactly one grant under the
	// request's key, of what it asked; the balance is before − charge + top-up.
	history, err := e.Store.History(ctx, run.TopUpAccount, ledgerdb.HistoryPage{Limit: 1000})
	require.NoError(t, err)
	type row struct {
		Kind   ledgerdb.EntryKind
		Amount int64
		Key    string
	}
	var rows []row
	for _, r := range history.Entries {
		rows = append(rows, row{r.Kind, r.Amount, r.Key})
	}
	require.Equal(t, []row{{ledgerdb.KindGrant, 120, "welcome"}, {ledgerdb.KindCharge, -40, ""}, {ledgerdb.KindGrant, 420, requests[0].Key}}, rows,
		"one grant for the request, however often its event was delivered")
	require.Equal(t, fmt.Sprintf("topup-%d", history.Entries[1].ID), requests[0].Key, "the request is named after the charge's row")
	ledgertest.RequireBalance(t, e.Store, run.TopUpAccount, 120-40+420)
	// The grant's block, paid for: spendable, all 420 in it.
	blocks, err := e.Store.Blocks(ctx, run.TopUpAccount)
	require.NoError(t, err)
	i := slices.IndexFunc(blocks, func(b ledgerdb.Block) bool { return b.Key == requests[0].Key })
	require.GreaterOrEqual(t, i, 0, "the top-up made a block")
	require.Equal(t, ledgerdb.BlockActive, blocks[i].Status)
	require.Equal(t, []int64{420, 420}, []int64{blocks[i].Amount, blocks[i].Remaining})
	ledgertest.RequireSound(t, e.Store, run.Account, run.TopUpAccount)
}
