package stories

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/plural"
	"github.com/jobbill/jobbill/webhooks"
)

// Story (i)'s figures: its account starts with 120 credits and has a rule that fills the balance
// up to 500 when a debit takes it below 100, at most 2000 credits a month; its render costs 40, so
// the charge takes the balance to 80 and the top-up buys 420.
const (
	topUpOpening   = 120
	topUpCharge    = 40 // a render, on the stories' price list
	topUpThreshold = 100
	topUpTarget    = 500
	topUpCap       = 2000
	// topUpCostBasis is what the product's customer pays for a credit, a decimal.
	topUpCostBasis = "0.01"
)

// topUpWait is how long story (i) waits for its top-up to be paid and its event answered twice:
// far beyond the few seconds a derive pass, a delivery and one retry take.
const topUpWait = 2 * time.Minute

// topUp is story (i), an automatic top-up as a customer's product lives it: an account with a
// top-up rule and a webhook endpoint, set up through the HTTP API, and behind that endpoint the
// product's payment code, which verifies the signed topup.requested event and buys the credits it
// asks for through the API, under the event's idempotency key: the grant posted pending its
// payment, then settled paid. It answers the event's first delivery 503, as if that answer were
// lost, so that jobbill delivers the event again and the payment code buys again under the same
// key — the same grant: nothing is bought twice.
type topUp struct {
	ledger  *ledgerdb.Store
	account string
	api     string
	client  http.Client

	// keyID and adminKey are the payment code's API key: an admin key, as grants need.
	keyID, adminKey string
	// endpointID and secret are the endpoint's, the secret to verify each delivery with.
	endpointID, secret string
	receiver           *http.Server

	mu sync.Mutex
	// payments are what the payment code did, one per delivery of a topup.requested event.
	payments []payment
	// err is why the receiver gave up, when it did.
	err error
	// done is closed once the event was delivered again and answered, or the receiver gave up.
	done     chan struct{}
	doneOnce sync.Once
}

// topUpRequest is the data of a topup.requested event, as the payment code reads it.
type topUpRequest struct {
	AccountID string `json:"account_id"`
	Amount    int64  `json:"amount"`
	Key       string `json:"idempotency_key"`
	Mode      string `json:"mode"`
	Threshold int64  `json:"threshold"`
	Balance   int64  `json:"balance"`
	JobID     string `json:"job_id"`
}

// payment is what the payment code did for one delivery of the event: the event, and the API's
// answers to the grant posted pending and to its settlement.
type payment struct {
	eventID            string
	request            topUpRequest
	posted, settled    apitype.Grant
	postedStatus, paid int
}

func newTopUp(ledger *ledgerdb.Store, account, api string) *topUp {
	return &topUp{ledger: ledger, account: account, api: strings.TrimSuffix(api, "/"),
		client: http.Client{Timeout: 30 * time.Second}, done: make(chan struct{})}
}

// setUp opens the account with its first credits, gives the payment code its key, starts its
// receiver, and, through the API as the product would, sets the account's top-up rule and
// registers the receiver as its webhook endpoint.
func (t *topUp) setUp(ctx context.Context) error {
	if t.api == "" {
		return errors.New("no HTTP API to call: the product's payment code needs one")
	}
	if _, err := t.ledger.OpenAccount(ctx, t.account); err != nil {
		return err
	}
	if _, err := t.ledger.Grant(ctx, ledgerdb.Credit{AccountID: t.account, Amount: topUpOpening, Key: "welcome", Memo: "the product's first credits"}); err != nil {
		return err
	}
	expires := time.Now().Add(time.Hour)
	key, err := apikeys.NewStore(t.ledger.Pool()).Create(ctx, apikeys.Spec{Scope: apikeys.ScopeAdmin,
		Name: "story (i): the product's payment code", ExpiresAt: &expires})
	if err != nil {
		return err
	}
	t.keyID, t.adminKey = key.ID, key.Secret
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("the product's webhook receiver: %w", err)
	}
	t.receiver = &http.Server{Handler: http.HandlerFunc(t.receive), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.receiver.Serve(ln) }()

	rule := apitype.TopUpRule{Threshold: topUpThreshold, Mode: string(ledgerdb.TopUpTarget), Amount: topUpTarget, MonthlyCap: topUpCap}
	if _, err := t.call(ctx, http.MethodPut, "topup-rule", rule, nil, http.StatusOK); err != nil {
		return err
	}
	var endpoint apitype.EndpointCreated
	if _, err := t.call(ctx, http.MethodPost, "webhooks", apitype.EndpointRequest{URL: "http://" + ln.Addr().String() + "/jobbill-webhooks",
		Description: "the product's payment code"}, &endpoint, http.StatusCreated); err != nil {
		return err
	}
	t.mu.Lock()
	t.endpointID, t.secret = endpoint.ID, endpoint.Secret
	t.mu.Unlock()
	return nil
}

// receive is the product's webhook receiver: it believes a delivery only once its signature is
// verified, pays for each topup.requested event, and lets the other events go. The first delivery
// of the event is answered 503 after the payment, as if the answer had been lost on its way.
func (t *topUp) receive(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	t.mu.Lock()
	secret := t.secret
	t.mu.Unlock()
	if secret == "" {
		// An event can come before the endpoint's answer has given the receiver its secret (the
		// account's first grant): it is not believed yet, and comes again.
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if err := webhooks.Verify(secret, r.Header, body); err != nil {
		t.giveUp(fmt.Errorf("a delivery failed verification: %w", err))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var msg webhooks.Body
	if err := json.Unmarshal(body, &msg); err != nil {
		t.giveUp(fmt.Errorf("a delivery carried no event: %w", err))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if msg.Type != "topup.requested" {
		w.WriteHeader(http.StatusNoContent) // this product acts on its top-ups only
		return
	}
	var req topUpRequest
	if err := json.Unmarshal(msg.Data, &req); err != nil {
		t.giveUp(fmt.Errorf("a topup.requested event: %w", err))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	p, err := t.pay(r.Context(), r.Header.Get(webhooks.HeaderID), req)
	if err != nil {
		t.giveUp(err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	t.mu.Lock()
	t.payments = append(t.payments, p)
	first := len(t.payments) == 1
	t.mu.Unlock()
	if first {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	t.doneOnce.Do(func() { close(t.done) })
}

// pay buys what the event asks for, as a payment code does: the grant posted under the event's
// idempotency key, pending its payment; the customer's card charged; the grant settled paid.
func (t *topUp) pay(ctx context.Context, eventID string, req topUpRequest) (payment, error) {
	if req.AccountID != t.account {
		return payment{}, fmt.Errorf("a top-up asked for account %q, not %q", req.AccountID, t.account)
	}
	p := payment{eventID: eventID, request: req}
	grant := apitype.GrantRequest{Amount: req.Amount, Key: req.Key, Memo: "automatic top-up, paid by card",
		CostBasis: topUpCostBasis, Pending: true}
	var err error
	if p.postedStatus, err = t.call(ctx, http.MethodPost, "grants", grant, &p.posted, http.StatusCreated, http.StatusOK); err != nil {
		return payment{}, err
	}
	// The customer's card is charged here, and the charge goes through.
	paid := true
	if p.paid, err = t.call(ctx, http.MethodPost, "grants/"+url.PathEscape(req.Key)+"/settle",
		apitype.SettleGrantRequest{Paid: &paid}, &p.settled, http.StatusOK); err != nil {
		return payment{}, err
	}
	return p, nil
}

// call sends one of the product's requests about the account (path is below
// /v1/accounts/{id}/) with the payment code's key and body as JSON (nil: none), and decodes the
// answer into out (nil: not read) when its status is one of ok; any other answer is an error
// quoting it.
func (t *topUp) call(ctx context.Context, method, path string, body, out any, ok ...int) (int, error) {
	var sent io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		sent = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.api+"/v1/accounts/"+url.PathEscape(t.account)+"/"+path, sent)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+t.adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("%s %s: reading the answer: %w", method, req.URL.Path, err)
	}
	if !slices.Contains(ok, resp.StatusCode) {
		return resp.StatusCode, fmt.Errorf("%s %s answered %d: %s", method, req.URL.Path, resp.StatusCode, answer)
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
		}
	}
	return resp.StatusCode, nil
}

// giveUp ends the story's wait with err, the first reason given.
func (t *topUp) giveUp(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
	t.doneOnce.Do(func() { close(t.done) })
}

// landed waits, after the story's job is charged, until the payment code has paid for the top-up
// and answered the event's second delivery.
func (t *topUp) landed(ctx context.Context, _ *jobs.Service, _ ledgerdb.JobKey) error {
	waitCtx, cancel := context.WithTimeout(ctx, topUpWait)
	defer cancel()
	select {
	case <-t.done:
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.err
	case <-waitCtx.Done():
		return fmt.Errorf("the top-up was not paid for and its event delivered twice within %s (is webhook delivery running? webhooks.enabled): %w", topUpWait, waitCtx.Err())
	}
}

// tell says how the top-up went, row by row, and fails the run unless the money adds up: one
// grant under the request's key, of what it asked, however often its event was delivered, and the
// balance what it was, less the charge, plus the top-up.
func (t *topUp) tell(ctx context.Context) (string, error) {
	t.mu.Lock()
	payments := slices.Clone(t.payments)
	t.mu.Unlock()
	if len(payments) < 2 {
		return "", fmt.Errorf("story (i): the payment code answered %d deliveries of its event, not 2", len(payments))
	}
	first, again := payments[0], payments[len(payments)-1]
	req := first.request
	for _, p := range payments[1:] {
		if p.eventID != first.eventID || p.request != req {
			return "", fmt.Errorf("story (i): a second top-up was asked for (%s, key %s) after %s (key %s)", p.eventID, p.request.Key, first.eventID, req.Key)
		}
	}
	switch {
	case first.postedStatus != http.StatusCreated || !first.posted.Pending || first.settled.Outcome != string(ledgerdb.Applied):
		return "", fmt.Errorf("story (i): the first payment was posted %d (pending %t) and settled %s, not 201 pending and applied",
			first.postedStatus, first.posted.Pending, first.settled.Outcome)
	case again.postedStatus != http.StatusOK || again.posted.Outcome != string(ledgerdb.AlreadyApplied) || again.posted.EntryID != first.settled.EntryID:
		return "", fmt.Errorf("story (i): paying again under key %s answered %d %s (row %d), not the same grant (row %d)",
			req.Key, again.postedStatus, again.posted.Outcome, again.posted.EntryID, first.settled.EntryID)
	}

	history, err := t.ledger.History(ctx, t.account, ledgerdb.HistoryPage{Limit: 1000})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "    account %s: below %d credits, fill it up to %d, at most %d a month\n", t.account, topUpThreshold, topUpTarget, topUpCap)
	var before, charged, toppedUp int64
	grants := 0
	for _, e := range history.Entries {
		b.WriteString(rowLine(e))
		switch {
		case e.Kind == ledgerdb.KindGrant && e.Key == req.Key:
			grants++
			toppedUp += e.Amount
		case e.Kind == ledgerdb.KindGrant:
			before += e.Amount
		default:
			charged -= e.Amount
		}
	}
	fmt.Fprintf(&b, "    topup.requested %s, signature verified: %s under key %s (balance %d after job %s's charge)\n",
		first.eventID, plural.Count(req.Amount, "credit"), req.Key, req.Balance, req.JobID)
	fmt.Fprintf(&b, "    the payment code posted the grant pending its payment (%d, no row yet), charged the card, settled it paid (%d %s: row %d)\n",
		first.postedStatus, first.paid, first.settled.Outcome, first.settled.EntryID)
	fmt.Fprintf(&b, "    its answer was lost (503); jobbill delivered %s again, and paying again under the same key answered %d %s: row %d, nothing bought twice\n",
		again.eventID, again.postedStatus, again.posted.Outcome, again.posted.EntryID)
	blocks, err := t.ledger.Blocks(ctx, t.account)
	if err != nil {
		return "", err
	}
	for _, blk := range blocks {
		if blk.Key == req.Key {
			fmt.Fprintf(&b, "    block %d: %s, %s at %s each, %d left, %s\n", blk.ID, blk.Category, plural.Count(blk.Amount, "credit"),
				blk.CostBasis, blk.Remaining, blk.Status)
		}
	}
	fmt.Fprintf(&b, "    balance of %s: %d before, %d charged, %d topped up, %d after\n", t.account, before, charged, toppedUp, history.Entries[len(history.Entries)-1].BalanceAfter)

	balance, err := t.ledger.Balance(ctx, t.account)
	if err != nil {
		return "", err
	}
	switch {
	case grants != 1 || toppedUp != req.Amount:
		return "", fmt.Errorf("story (i): %d grants of %d credits under key %s, not one of %d", grants, toppedUp, req.Key, req.Amount)
	case req.Amount != topUpTarget-(topUpOpening-topUpCharge):
		return "", fmt.Errorf("story (i): the top-up asked for %d credits, not the %d that fill %d up to %d", req.Amount, topUpTarget-(topUpOpening-topUpCharge), topUpOpening-topUpCharge, topUpTarget)
	case balance != before-charged+toppedUp || balance != topUpTarget:
		return "", fmt.Errorf("story (i): the balance is %d, not %d before − %d charged + %d topped up", balance, before, charged, toppedUp)
	}
	return b.String(), nil
}

// close deletes the endpoint, revokes the payment code's key and stops the receiver: nothing of
// the story is left to deliver to, or to call the API with, once it is told.
func (t *topUp) close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if t.endpointID != "" {
		_, err := t.call(ctx, http.MethodDelete, "webhooks/"+url.PathEscape(t.endpointID), nil, nil, http.StatusOK)
		errs = append(errs, err)
	}
	if t.keyID != "" {
		_, _, err := apikeys.NewStore(t.ledger.Pool()).Revoke(ctx, t.keyID)
		errs = append(errs, err)
	}
	if t.receiver != nil {
		shutdownCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		errs = append(errs, t.receiver.Shutdown(shutdownCtx))
	}
	return errors.Join(errs...)
}
