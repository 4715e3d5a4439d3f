package webhooks_test

// What the delivery tests share: a worker's options for tests, a receiver that verifies and keeps
// what it is sent, the accounts that listen to it, and waits on the outbox.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/webhooks"
)

// testOptions are a delivery worker's options for tests, over ws and limited to the accounts: fast
// polls and backoffs, and receivers on loopback allowed (httptest).
func testOptions(ws *webhooks.Store, accounts ...string) webhooks.Options {
	return webhooks.Options{
		Store:            ws,
		PollInterval:     10 * time.Millisecond,
		InitialBackoff:   20 * time.Millisecond,
		MaxBackoff:       80 * time.Millisecond,
		Timeout:          2 * time.Second,
		AllowPrivateURLs: true,
		Accounts:         accounts,
	}
}

// received is one delivery a receiver took (answered 2xx).
type received struct {
	id     string
	header http.Header
	body   []byte
	msg    webhooks.Body
}

// receiver is a customer's webhook endpoint: it verifies every delivery with the Standard Webhooks
// library and keeps the ones it accepted, in the order it accepted them. While down it answers
// 500, or drops the connection without an answer.
type receiver struct {
	t      *testing.T
	secret atomic.Value // string
	down   atomic.Bool
	calls  atomic.Int64
	mu     sync.Mutex
	got    []received
	srv    *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	n := r.calls.Add(1)
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if r.down.Load() {
		if n%2 == 0 {
			// Closed: the connection drops with no answer at all.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	wh, err := standardwebhooks.NewWebhook(r.secret.Load().(string))
	if err != nil {
		r.t.Errorf("receiver: %v", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if err := wh.Verify(body, req.Header); err != nil {
		r.t.Errorf("receiver: a delivery failed verification: %v", err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var msg webhooks.Body
	if err := json.Unmarshal(body, &msg); err != nil {
		r.t.Errorf("receiver: body: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, received{id: req.Header.Get(webhooks.HeaderID), header: req.Header.Clone(), body: body, msg: msg})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// endpoint makes an endpoint of acct at the receiver, which verifies with its secret.
func (r *receiver) endpoint(t *testing.T, ws *webhooks.Store, acct string) webhooks.Created {
	t.Helper()
	ep, err := ws.CreateEndpoint(context.Background(), webhooks.EndpointSpec{AccountID: acct, URL: r.srv.URL + "/hooks", Description: "test receiver"},
		webhooks.URLPolicy{AllowPrivate: true})
	require.NoError(t, err)
	r.secret.Store(ep.Secret)
	return ep
}

// hooked is the set-up of most delivery tests: the test ledger and its webhook store, an account
// granted credits (account), and a test receiver registered as the account's endpoint.
func hooked(t *testing.T, credits int64) (*ledgerdb.Store, *webhooks.Store, string, *receiver, webhooks.Created) {
	t.Helper()
	s, ws := stores(t)
	acct := account(t, s, ws, credits)
	rcv := newReceiver(t)
	return s, ws, acct, rcv, rcv.endpoint(t, ws, acct)
}

// runWorkers runs n delivery workers for the accounts until the test ends, and answers a stop that
// waits for them.
func runWorkers(t *testing.T, opts webhooks.Options, n int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = webhooks.NewWorker(opts).Run(ctx)
		}()
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// pendingOf counts the endpoint's deliveries that are not yet delivered or failed.
func pendingOf(t *testing.T, s *ledgerdb.Store, endpointID string) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending'`, endpointID).Scan(&n))
	return n
}

// caughtUp waits until every transition committed so far has had its events derived (and queued):
// the derive pass reads a transaction only once every older one has ended, and the shared database
// may have transactions of other tests open, so the wait is generous.
func caughtUp(t *testing.T, ws *webhooks.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, ws.CatchUp(ctx))
}

// waitDelivered waits until every event derived so far has been delivered or given up at the
// endpoint.
func waitDelivered(t *testing.T, s *ledgerdb.Store, endpointID string) {
	t.Helper()
	caughtUp(t, webhooks.NewStore(s.Pool()))
	require.Eventually(t, func() bool { return pendingOf(t, s, endpointID) == 0 }, 20*time.Second, 20*time.Millisecond)
}

// lifecycle runs jobs through the ledger: every other job is settled, the rest refunded and then
// reclaimed by a late result, so that each job writes three or two events.
func lifecycle(t *testing.T, s *ledgerdb.Store, acct, kind string, jobs int) {
	t.Helper()
	ctx := context.Background()
	for i := range jobs {
		job := chargedJob(t, s, acct, kind)
		if i%2 == 1 {
			applied(t, ledgerdb.Applied)(s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "", 3))
		}
		applied(t, ledgerdb.Applied)(s.Settle(ctx, job, 1, ledgerdb.Units(int64(i%5)), "out://"+strconv.Itoa(i)))
	}
}

// requireInOrderPerJob checks what a receiver took against the account's events: every event,
// each verified, and each job's events in their order — counting each webhook-id once (a
// duplicate is recognised by it).
func requireInOrderPerJob(t *testing.T, evs []webhooks.Event, got []received) {
	t.Helper()
	seen := map[string]bool{}
	perJob := map[string][]string{}
	for _, r := range got {
		if seen[r.id] {
			continue
		}
		seen[r.id] = true
		var d struct {
			JobID string `json:"job_id"`
		}
		require.NoError(t, json.Unmarshal(r.msg.Data, &d))
		perJob[d.JobID] = append(perJob[d.JobID], r.id)
	}
	want := map[string][]string{}
	for _, e := range evs {
		require.True(t, seen[e.ID], "event %s (%s of %s) was never received", e.ID, e.Type, e.JobID)
		want[e.JobID] = append(want[e.JobID], e.ID)
	}
	require.Equal(t, want, perJob, "each job's events arrive in order")
}
