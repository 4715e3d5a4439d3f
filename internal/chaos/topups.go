package chaos

// The automatic top-up: the poor account's rule, and the payment code that answers its requests —
// an HTTP endpoint the workers deliver the account's webhooks to, which verifies each delivery's
// Standard Webhooks signature and, on topup.requested, buys the credits asked for with a paid grant
// under the event's idempotency key, sometimes twice.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/webhooks"
)

// The workers' webhook delivery settings: a short poll, and a short backoff so that a delivery the
// receiver refused on purpose comes again within the run.
const (
	webhookPoll           = 250 * time.Millisecond
	webhookTimeout        = 5 * time.Second
	webhookInitialBackoff = 500 * time.Millisecond
	webhookMaxBackoff     = 2 * time.Second
	// webhookMaxAge gives up deliveries an earlier run left to an endpoint it could not disable
	// (its receiver is gone) soon after their first attempt in this one.
	webhookMaxAge = 10 * time.Minute
)

// typeTopUpRequested is the webhook event that asks the payment code for credits.
const typeTopUpRequested = "topup.requested"

// topUpReceiver is the rule account's payment code. Of the top-up requests, in the order they
// first arrive, every third one's grant is posted twice at once, the next one's once with the
// delivery answered 503 so that the workers deliver it again (and the grant is posted again), and
// the next one's once: however often it is posted, a key buys the credits once.
type topUpReceiver struct {
	r       *run
	account string
	server  *http.Server
	url     string

	mu         sync.Mutex
	secret     string
	endpointID string
	deliveries map[string]int // by webhook-id
	requests   []string       // the top-up requests' webhook-ids, in the order they first arrived
	posts      int            // grants posted under a request's key
	repeats    int            // of which answered AlreadyApplied: the key had bought its credits already
}

// serveTopUps starts the receiver on a free loopback port; stop closes it and disables its
// endpoint, so that no later run's workers deliver to a port nobody listens on.
func (r *run) serveTopUps() (stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return func() {}, fmt.Errorf("chaos: the top-up receiver: %w", err)
	}
	rc := &topUpReceiver{r: r, account: r.credits.rule.AccountID, url: "http://" + ln.Addr().String() + "/topups",
		deliveries: map[string]int{}}
	rc.server = &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rc.server.Serve(ln) }()
	r.credits.receiver = rc
	fmt.Fprintf(r.out, "top-up receiver on %s\n", rc.url)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rc.server.Shutdown(ctx)
		rc.mu.Lock()
		id := rc.endpointID
		rc.mu.Unlock()
		if id != "" {
			if _, _, err := webhooks.NewStore(r.ledger.Pool()).DeleteEndpoint(ctx, rc.account, id); err != nil {
				fmt.Fprintf(r.out, "disabling the top-up endpoint %s: %v\n", id, err)
			}
		}
	}, nil
}

// openTopUps gives the rule account its endpoint, on the receiver, and its top-up rule. Called
// before the account's grants, so that every row of the account is derived into its events.
func (r *run) openTopUps(ctx context.Context) error {
	rc := r.credits.receiver
	created, err := webhooks.NewStore(r.ledger.Pool()).CreateEndpoint(ctx,
		webhooks.EndpointSpec{AccountID: rc.account, URL: rc.url, Description: "chaos run: the payment code"},
		webhooks.URLPolicy{AllowPrivate: true})
	if err != nil {
		return fmt.Errorf("chaos: the top-up endpoint: %w", err)
	}
	rc.mu.Lock()
	rc.secret, rc.endpointID = created.Secret, created.ID
	rc.mu.Unlock()
	if _, err := r.ledger.SetTopUpRule(ctx, r.credits.rule); err != nil {
		return fmt.Errorf("chaos: the top-up rule: %w", err)
	}
	return nil
}

// topUpRequest is what a topup.requested event asks for.
type topUpRequest struct {
	AccountID      string `json:"account_id"`
	Amount         int64  `json:"amount"`
	IdempotencyKey string `json:"idempotency_key"`
}

// ServeHTTP verifies one delivery with the Standard Webhooks library, as a customer's receiver
// does, and pays a top-up request.
func (rc *topUpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	rc.mu.Lock()
	secret := rc.secret
	rc.mu.Unlock()
	wh, werr := standardwebhooks.NewWebhook(secret)
	if err != nil || werr != nil || wh.Verify(body, req.Header) != nil {
		rc.r.anomaly("a webhook delivery to the top-up receiver failed its signature check (webhook-id %q)", req.Header.Get(webhooks.HeaderID))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var msg struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	var ask topUpRequest
	if json.Unmarshal(body, &msg) != nil || (msg.Type == typeTopUpRequested && json.Unmarshal(msg.Data, &ask) != nil) {
		rc.r.anomaly("a webhook delivery to the top-up receiver carried no event: %.200s", body)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := req.Header.Get(webhooks.HeaderID)
	rc.mu.Lock()
	rc.deliveries[id]++
	first := rc.deliveries[id] == 1
	n := len(rc.requests)
	if first && msg.Type == typeTopUpRequested {
		rc.requests = append(rc.requests, id)
	}
	rc.mu.Unlock()
	if msg.Type != typeTopUpRequested {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if ask.AccountID != rc.account || ask.Amount <= 0 || ask.IdempotencyKey == "" {
		rc.r.anomaly("a top-up request asks for %d credits of account %q under key %q", ask.Amount, ask.AccountID, ask.IdempotencyKey)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.WriteHeader(rc.pay(req.Context(), id, ask, first, n))
}

// pay buys the credits a request asks for and answers the delivery's status: the n-th request (the
// first time it arrives) is posted twice at once, posted and answered 503, or posted once, by n
// modulo 3; a request delivered again is posted once more.
func (rc *topUpReceiver) pay(ctx context.Context, id string, ask topUpRequest, first bool, n int) int {
	times, status := 1, http.StatusNoContent
	if first && n%3 == 0 {
		times = 2
	}
	if first && n%3 == 1 {
		status = http.StatusServiceUnavailable
	}
	errs := make([]error, times)
	var all sync.WaitGroup
	for k := range times {
		all.Go(func() {
			p, err := rc.r.ledger.Grant(ctx, ledgerdb.Credit{AccountID: ask.AccountID, Amount: ask.Amount, Key: ask.IdempotencyKey,
				Memo: "automatic top-up", Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, Priority: 1, CostBasis: costBasis}})
			errs[k] = err
			rc.mu.Lock()
			defer rc.mu.Unlock()
			if err == nil {
				rc.posts++
				if p.Outcome == ledgerdb.AlreadyApplied {
					rc.repeats++
				}
			}
		})
	}
	all.Wait()
	if err := errors.Join(errs...); err != nil {
		// Not paid (Postgres restarting, say): the workers deliver the request again.
		rc.r.logf("topup", "request %s (%d credits, key %s) not paid: %v", id, ask.Amount, ask.IdempotencyKey, err)
		return http.StatusServiceUnavailable
	}
	rc.r.logf("topup", "request %s paid: %d credits under key %s, posted %d time(s)%s", id, ask.Amount, ask.IdempotencyKey, times,
		map[bool]string{true: ", answered 503 so that it is delivered again"}[status != http.StatusNoContent])
	return status
}

// figures answers how many deliveries the receiver took, the grants it posted and how many of
// those bought nothing (their key had bought its credits already).
func (rc *topUpReceiver) figures() (deliveries, posts, repeats int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, n := range rc.deliveries {
		deliveries += n
	}
	return deliveries, rc.posts, rc.repeats
}

// topUpRequests answers the rule account's topup.requested events derived so far.
func (r *run) topUpRequests(ctx context.Context) ([]webhooks.Event, []topUpRequest, error) {
	ws := webhooks.NewStore(r.ledger.Pool())
	var events []webhooks.Event
	var asks []topUpRequest
	for after := int64(0); ; {
		page, err := ws.Events(ctx, r.credits.rule.AccountID, after, 1000)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range page {
			if e.Type != typeTopUpRequested {
				continue
			}
			var ask topUpRequest
			if err := json.Unmarshal(e.Data, &ask); err != nil {
				return nil, nil, fmt.Errorf("event %s: %w", e.ID, err)
			}
			events, asks = append(events, e), append(asks, ask)
		}
		if len(page) < 1000 {
			return events, asks, nil
		}
		after = page[len(page)-1].Seq
	}
}

// topUpsBusy lists the top-up requests not paid yet, once every row committed so far has had its
// events derived: the run is not at rest while the payment code still has work.
func (r *run) topUpsBusy(ctx context.Context, blocks []ledgerdb.Block) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := webhooks.NewStore(r.ledger.Pool()).CatchUp(cctx); err != nil {
		return []string{"webhook events not derived yet: " + err.Error()}, nil
	}
	_, asks, err := r.topUpRequests(ctx)
	if err != nil {
		return nil, err
	}
	paid := map[string]bool{}
	for _, b := range blocks {
		paid[b.Key] = b.Status == ledgerdb.BlockActive
	}
	var busy []string
	for _, a := range asks {
		if !paid[a.IdempotencyKey] {
			busy = append(busy, fmt.Sprintf("top-up %s (%d credits) not paid yet", a.IdempotencyKey, a.Amount))
		}
	}
	return busy, nil
}

// checkTopUps checks the rule account's top-ups: every topup.requested event was paid by exactly
// one grant row of its amount under its key (one block), no grant was posted under a top-up key
// nobody asked for, and each calendar month's requests (UTC) ask for at most the rule's cap.
func (r *run) checkTopUps(ctx context.Context, a accountCredits, t *CreditTotals) (paid, capped []string, err error) {
	events, asks, err := r.topUpRequests(ctx)
	if err != nil {
		return nil, nil, err
	}
	asked := map[string]bool{}
	months := map[string]int64{}
	for i, ask := range asks {
		t.TopUpsRequested++
		t.TopUpCredits += ask.Amount
		months[events[i].CreatedAt.UTC().Format("2006-01")] += ask.Amount
		if asked[ask.IdempotencyKey] {
			paid = append(paid, fmt.Sprintf("two top-up requests share the key %s", ask.IdempotencyKey))
		}
		asked[ask.IdempotencyKey] = true
		rows := a.grantRows(ask.IdempotencyKey)
		blocks := 0
		for _, b := range a.blocks {
			if b.Key == ask.IdempotencyKey {
				blocks++
			}
		}
		if len(rows) != 1 || rows[0].Amount != ask.Amount || blocks != 1 {
			paid = append(paid, fmt.Sprintf("top-up request %s asked for %d credits under key %s and was paid by %d grant rows (%s) in %d blocks",
				events[i].ID, ask.Amount, ask.IdempotencyKey, len(rows), amounts(rows), blocks))
			continue
		}
		t.TopUpsPaid++
	}
	for _, e := range a.order {
		if e.Kind == ledgerdb.KindGrant && strings.HasPrefix(e.Key, "topup-") && !asked[e.Key] {
			paid = append(paid, fmt.Sprintf("grant row %d (%d credits) is under top-up key %s, which no request asked for", e.ID, e.Amount, e.Key))
		}
	}
	for month, sum := range months {
		if sum > r.credits.rule.MonthlyCap {
			capped = append(capped, fmt.Sprintf("the top-up requests of %s ask for %d credits, above the monthly cap of %d", month, sum, r.credits.rule.MonthlyCap))
		}
	}
	return paid, capped, nil
}
