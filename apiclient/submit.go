package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/jobbill/jobbill/apitype"
)

// Track starts tracking a new submission: it saves the body and the creation time. The caller
// makes the job ID once, with [NewJobID], and persists the Tracked if it must survive a restart.
func (c *Client) Track(req apitype.SubmitRequest) *Tracked {
	return &Tracked{Request: req, CreatedAt: c.clock().Now(), State: Unknown}
}

// Run is the whole flow for one job: submit, then poll until it is settled. It answers the
// settled status, or ErrDeleted (with the money state the API told), ErrNotReceived,
// ErrInsufficientCredits, an *APIError, or ctx's error (the job is then still tracked: poll it
// again later, never resubmit under a new ID).
func (c *Client) Run(ctx context.Context, t *Tracked) (apitype.Status, error) {
	st, next, retryAfter, err := c.submit(ctx, t)
	switch {
	case err != nil:
		return st, err
	case next == Done && st.State == stateRejected:
		// Answered as Poll answers it: a rejected job is an error that says nothing was charged.
		return st, ErrInsufficientCredits
	case next == Done:
		return st, nil
	case next == Deleted:
		return st, ErrDeleted
	case retryAfter > 0:
		// The last attempt was asked to wait: the first look waits too.
		if err := c.wait(ctx, c.Backoff.honour(retryAfter)); err != nil {
			return apitype.Status{}, err
		}
	}
	return c.Poll(ctx, t)
}

// Submit sends the saved body, retrying transient failures under the same ID up to
// SubmitAttempts times, spaced by [Backoff] and never sooner than a Retry-After. When every
// attempt failed transiently it returns no error and leaves t.State unknown: [Client.Poll] then
// confirms whether the submission arrived. A tracked submission that was accepted is never sent
// again: Submit answers what the client last knew of it, with the same error as when it learnt
// it (ErrDeleted for a deleted job, ErrInsufficientCredits for a rejected one).
func (c *Client) Submit(ctx context.Context, t *Tracked) (apitype.Status, error) {
	st, _, _, err := c.submit(ctx, t)
	return st, err
}

// submit is Submit, and also answers what to do next ([OnSubmitted]'s action: KeepPolling when
// nothing is known yet) and the Retry-After of the last attempt when every attempt failed
// transiently, so that Run's first look honours it.
func (c *Client) submit(ctx context.Context, t *Tracked) (apitype.Status, Action, time.Duration, error) {
	if t.State == Accepted {
		switch {
		case t.Last == nil:
			return apitype.Status{}, KeepPolling, 0, nil
		case t.Last.State == stateDeleted:
			return *t.Last, Deleted, 0, ErrDeleted
		case t.Last.State == stateRejected:
			return *t.Last, Done, 0, ErrInsufficientCredits
		case t.Last.MoneyState == MoneyUnknown:
			// An answer that was not taken at its word: a look tells.
			return *t.Last, KeepPolling, 0, nil
		}
		next, _ := OnSubmitted(http.StatusOK, *t.Last)
		return *t.Last, next, 0, nil
	}
	attempts := c.SubmitAttempts
	if attempts <= 0 {
		attempts = 3
	}
	var last sent
	for i := range attempts {
		var err error
		if last, err = c.post(ctx, t); err != nil || !last.transient {
			return last.status, last.next, 0, err
		}
		if i < attempts-1 {
			if err := c.wait(ctx, c.Backoff.Delay(i, last.retryAfter)); err != nil {
				return apitype.Status{}, KeepPolling, 0, err
			}
		}
	}
	return apitype.Status{}, KeepPolling, last.retryAfter, nil
}

// sent is what one POST of a submission came to.
type sent struct {
	// status is the job as the answer tells it, when it tells it.
	status apitype.Status
	// next is what to do after an answer that accepted the job ([OnSubmitted]).
	next Action
	// transient means the submission's fate is still unknown (a network error, 408, 429, 5xx, an
	// answer that is not the API's): send it again under the same ID, or confirm it by polling.
	transient bool
	// retryAfter is the wait a 429 or 503 asked for.
	retryAfter time.Duration
}

const (
	stateDeleted  = "deleted"
	stateRejected = "rejected"
	moneyNotPaid  = "not_charged"
	// msgGoneAfterAccepted is what the user reads when the API no longer knows an ID it once
	// accepted: its 404 says "not charged" of an ID it never saw, which is not this one.
	msgGoneAfterAccepted = "The job was accepted earlier and its record is gone: it was deleted. Deleting moves no money, and a refunded job's late result may still take its refund back; the client cannot tell where it stands."
)

// post sends the submission once. An answer that settles the submission's fate — accepted, or
// refused for good — sets t.State; a transient one leaves it unknown.
func (c *Client) post(ctx context.Context, t *Tracked) (sent, error) {
	body, err := json.Marshal(t.Request)
	if err != nil {
		return sent{}, err
	}
	a, err := c.do(ctx, http.MethodPost, "/v1/jobs", nil, body)
	if err != nil {
		if ctx.Err() != nil {
			return sent{}, ctx.Err()
		}
		return sent{transient: true}, nil
	}
	switch a.code {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		var sub apitype.Submission
		if err := json.Unmarshal(a.body, &sub); err != nil || sub.Status.State == "" {
			// Not the API's answer, or cut short: the job may have been accepted. The same ID
			// again, or a look, tells.
			return sent{transient: true}, nil
		}
		// The status code says where the money stands, as the job does; an answer whose two
		// disagree is taken at neither's word (OnSubmitted).
		next, money := OnSubmitted(a.code, sub.Status)
		st := sub.Status
		st.MoneyState = money
		t.State, t.Last = Accepted, &st
		return sent{status: st, next: next}, nil
	case http.StatusNotFound:
		// The submission route has no 404 of its own: this one is a proxy's, or the API's
		// no_route for a misrouted request. Nothing is known of the job.
		return sent{transient: true}, nil
	}
	if transient(a.code) {
		return sent{transient: true, retryAfter: a.retryAfter}, nil
	}
	ae := a.apiError()
	switch {
	case a.code == http.StatusPaymentRequired && ae.Code == CodeInsufficientCredits:
		// The API's own 402 says nothing was charged (its money_state says so too).
		st := t.told(or(ae.State, stateRejected), or(ae.MoneyState, moneyNotPaid), ae.Message)
		st.Reason = CodeInsufficientCredits
		t.State, t.Last = Accepted, &st
		return sent{status: st}, ErrInsufficientCredits
	case a.code == http.StatusGone:
		// Accepted once, then deleted: the answer's money state, or unknown — never "not
		// charged" by default, since the job may have been charged before it was deleted.
		st := t.told(or(ae.State, stateDeleted), or(ae.MoneyState, MoneyUnknown), ae.Message)
		t.State, t.Last = Accepted, &st
		return sent{status: st}, ErrDeleted
	}
	// A refusal that does not tell where the job's money stands leaves it unknown.
	ae.MoneyState = or(ae.MoneyState, MoneyUnknown)
	return sent{}, ae
}

// told is the tracked job as an answer without a status body told it.
func (t *Tracked) told(state, money, message string) apitype.Status {
	return apitype.Status{JobID: t.Request.JobID, AccountID: t.Request.AccountID, Kind: t.Request.Kind,
		State: state, MoneyState: money, Message: message}
}

func or(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// Poll looks at the job and follows [Decide] until it is settled, deleted, not received, or
// refused; ctx bounds it. Between two looks it waits PollInterval while the job is being worked
// on, and a [Backoff] wait, never shorter than a Retry-After, after a look that failed
// transiently.
func (c *Client) Poll(ctx context.Context, t *Tracked) (apitype.Status, error) {
	if _, err := pathID("job ID", t.Request.JobID); err != nil {
		return apitype.Status{}, err
	}
	failures := 0
	for {
		obs, st, apiErr := c.look(ctx, t.Request.JobID, t.Request.AccountID)
		if ctx.Err() != nil {
			return apitype.Status{}, ctx.Err()
		}
		if obs.StatusCode == http.StatusOK {
			t.State, t.Last = Accepted, &st
		}
		wait := c.interval()
		switch Decide(*t, obs, c.clock().Now()) {
		case Done:
			if st.State == stateRejected {
				return st, ErrInsufficientCredits
			}
			return st, nil
		case Deleted:
			if obs.StatusCode == http.StatusNotFound {
				st = t.told(stateDeleted, MoneyUnknown, msgGoneAfterAccepted)
			}
			t.State, t.Last = Accepted, &st
			return st, ErrDeleted
		case NotReceived:
			return apitype.Status{}, ErrNotReceived
		case Fail:
			return apitype.Status{}, apiErr
		case Resubmit:
			t.Resubmissions++
			s, err := c.post(ctx, t)
			if err != nil {
				return s.status, err
			}
			wait = max(wait, c.Backoff.honour(s.retryAfter))
		case KeepPolling, Wait:
		}
		if obs.transient() {
			var retryAfter time.Duration
			if apiErr != nil {
				retryAfter = apiErr.RetryAfter
			}
			wait = c.Backoff.Delay(failures, retryAfter)
			failures++
		} else {
			failures = 0
		}
		if err := c.wait(ctx, wait); err != nil {
			return apitype.Status{}, err
		}
	}
}

// look reads a job once, in account (the client's when empty). A network error or an unreadable
// 200 is an Observation with Err; any other status comes with its *APIError, whose money state
// is unknown unless the answer told it, and a 410 with the job as the error tells it.
func (c *Client) look(ctx context.Context, jobID, account string) (Observation, apitype.Status, *APIError) {
	id, err := pathID("job ID", jobID)
	if err != nil {
		return Observation{Err: err}, apitype.Status{}, nil
	}
	a, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+id, c.jobQuery(account), nil)
	if err != nil {
		return Observation{Err: err}, apitype.Status{}, nil
	}
	obs := Observation{StatusCode: a.code}
	if a.code != http.StatusOK {
		ae := a.apiError()
		if ae.FromAPI() {
			obs.Code = ae.Code
		}
		// An answer about this job that does not tell where its money stands (no_route, 401,
		// 403, 5xx …) leaves it unknown.
		ae.MoneyState = or(ae.MoneyState, MoneyUnknown)
		var st apitype.Status
		if a.code == http.StatusGone {
			st = apitype.Status{JobID: jobID, State: or(ae.State, stateDeleted), MoneyState: or(ae.MoneyState, MoneyUnknown), Message: ae.Message}
		}
		return obs, st, ae
	}
	var st apitype.Status
	if err := json.Unmarshal(a.body, &st); err != nil {
		// An unreadable 200 is treated like a network error: look again.
		return Observation{Err: err}, apitype.Status{}, nil
	}
	obs.State = st.State
	return obs, st, nil
}
