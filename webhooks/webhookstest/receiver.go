// Package webhookstest is a customer's webhook receiver for tests: it verifies every delivery with
// the Standard Webhooks library, as a receiver in another language would, and keeps what it
// accepted.
package webhookstest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jobbill/jobbill/webhooks"
)

// Receiver is an http.Handler that verifies each delivery against the endpoint's signing secret
// and keeps the accepted ones' webhook-id, type, job and data. A delivery that fails verification, or
// whose body is no event, is answered 401 or 400 and counted as bad. Its zero value is ready once
// SetSecret has been called.
type Receiver struct {
	mu     sync.Mutex
	secret string
	got    []delivery
	bad    int
}

// delivery is one accepted delivery.
type delivery struct {
	id, typ, job string
	data         json.RawMessage
}

// Event is an event a receiver accepted: its webhook-id, type and payload.
type Event struct {
	// ID is the webhook-id the delivery carried.
	ID string
	// Type is the event's type (credit.granted …).
	Type string
	// Data is the event's payload, as sent.
	Data json.RawMessage
}

// SetSecret sets the signing secret ("whsec_…") the endpoint was created with.
func (r *Receiver) SetSecret(secret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = secret
}

// ServeHTTP verifies and keeps one delivery.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	wh, err := standardwebhooks.NewWebhook(r.secret)
	if err != nil || wh.Verify(body, req.Header) != nil {
		r.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var msg struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	var data struct {
		JobID string `json:"job_id"`
	}
	if json.Unmarshal(body, &msg) != nil || json.Unmarshal(msg.Data, &data) != nil {
		r.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.got = append(r.got, delivery{req.Header.Get(webhooks.HeaderID), msg.Type, data.JobID, msg.Data})
	w.WriteHeader(http.StatusOK)
}

// ByJob lists each job's event types (job.*) in the order they arrived, counting each webhook-id
// once (a redelivery of the same event is not a second event). The account's events are not a
// job's, even when they name one (a credit.expired a refund caused): AccountEvents has them.
func (r *Receiver) ByJob() map[string][]string {
	out := map[string][]string{}
	for _, g := range r.once() {
		if isJobEvent(g.typ) {
			out[g.job] = append(out[g.job], g.typ)
		}
	}
	return out
}

// AccountEvents lists the account's events (balance.low, credit.granted, credit.expired,
// topup.requested) in the
// order they arrived, each webhook-id once.
func (r *Receiver) AccountEvents() []Event {
	var out []Event
	for _, g := range r.once() {
		if !isJobEvent(g.typ) {
			out = append(out, Event{ID: g.id, Type: g.typ, Data: g.data})
		}
	}
	return out
}

// once is every accepted delivery, the first of each webhook-id only, in the order they arrived.
func (r *Receiver) once() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var out []delivery
	for _, g := range r.got {
		if !seen[g.id] {
			seen[g.id] = true
			out = append(out, g)
		}
	}
	return out
}

// isJobEvent tells a job's transition (job.charged …) from an account's event.
func isJobEvent(typ string) bool { return strings.HasPrefix(typ, "job.") }

// Bad is how many deliveries failed verification or carried no event.
func (r *Receiver) Bad() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}
