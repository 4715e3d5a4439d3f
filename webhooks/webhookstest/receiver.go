// Package webhookstest is a customer's webhook receiver for tests: it verifies every delivery with
// the Standard Webhooks library, as a receiver in another language would, and keeps what it
// accepted.
package webhookstest

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jobbill/jobbill/webhooks"
)

// Receiver is an http.Handler that verifies each delivery against the endpoint's signing secret
// and keeps the accepted ones' webhook-id, type and job. A delivery that fails verification, or
// whose body is no event, is answered 401 or 400 and counted as bad. Its zero value is ready once
// SetSecret has been called.
type Receiver struct {
	mu     sync.Mutex
	secret string
	got    []delivery
	bad    int
}

// delivery is one accepted delivery.
type delivery struct{ id, typ, job string }

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
		Type string `json:"type"`
		Data struct {
			JobID string `json:"job_id"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &msg) != nil {
		r.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.got = append(r.got, delivery{req.Header.Get(webhooks.HeaderID), msg.Type, msg.Data.JobID})
	w.WriteHeader(http.StatusOK)
}

// ByJob lists each job's event types in the order they arrived, counting each webhook-id once (a
// redelivery of the same event is not a second event).
func (r *Receiver) ByJob() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	out := map[string][]string{}
	for _, g := range r.got {
		if !seen[g.id] {
			seen[g.id] = true
			out[g.job] = append(out[g.job], g.typ)
		}
	}
	return out
}

// Bad is how many deliveries failed verification or carried no event.
func (r *Receiver) Bad() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}
