// Package apiclient is a Go client of jobbill's HTTP API that follows the submission rules
// (docs/design.md, "Submission"), so product code cannot get a paid job's state wrong:
//
//   - A submission names the job's kind, never an amount: the server sets prices, and its price
//     list ([Client.Prices]) says what a job of each kind holds and costs.
//   - A submission is retried under the same client job ID, with the same saved body — never a
//     new ID, so never a second paid job.
//   - A submission whose answer was lost is confirmed by GET: 404 means it never arrived and
//     nothing was charged; it is resubmitted (same ID, same body) at most MaxResubmissions
//     times, and after ConfirmWindow from its creation the user is told "not received by the
//     server, not charged".
//   - While polling, 408, 429, 5xx and network errors are transient, and submitting or an
//     unknown state means keep polling the same ID.
//   - A 410, or a 404 for an ID that was once accepted, means the job was deleted: never
//     resubmitted.
//
// [Decide] and [OnNotFound] hold the rules as pure functions; [Client] applies them.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// JobRequest is the body of a submission (POST /v1/jobs). It names the job's kind and carries no
// amount: prices are set by the server, whose price list ([Client.Prices]) says what each kind
// costs.
type JobRequest struct {
	// JobID is the client-generated ID; the same ID is the same job, forever.
	JobID string `json:"job_id"`
	// AccountID is the paying account.
	AccountID string `json:"account_id"`
	// Kind names what the job is ("render-4k"); the server prices it.
	Kind string `json:"kind"`
	// MaxUnits, for a kind metered by the GPU-second, is the most units the job may use, at most
	// the kind's own maximum; 0 (left out of the body) holds the kind's maximum. The job's charge
	// holds this many units.
	MaxUnits int64 `json:"max_units,omitempty"`
	// InputRef points at the job's input.
	InputRef string `json:"input_ref"`
}

// Status is a job as the API answers it: where it stands, and where the user's money stands.
type Status struct {
	// JobID and AccountID identify the job.
	JobID     string `json:"job_id"`
	AccountID string `json:"account_id"`
	// Kind is what the job is; PriceVersion the version of the kind's price it was submitted at,
	// which a later price change never alters.
	Kind         string `json:"kind,omitempty"`
	PriceVersion int    `json:"price_version,omitempty"`
	// Unit ("job" or "gpu_second"), UnitPrice (credits per unit) and HeldUnits (the units the
	// charge holds) are the job's price.
	Unit      string `json:"unit,omitempty"`
	UnitPrice int64  `json:"unit_price,omitempty"`
	HeldUnits int64  `json:"held_units,omitempty"`
	// Held is what the charge holds, in credits: UnitPrice × HeldUnits.
	Held int64 `json:"held"`
	// UnitsUsed is the usage the job was settled at, capped at HeldUnits; nil until settled.
	UnitsUsed *int64 `json:"units_used,omitempty"`
	// Charged is what the job costs the account as it stands: the whole hold while running,
	// UnitsUsed × UnitPrice once settled, 0 when not charged or refunded.
	Charged int64 `json:"charged"`
	// Released is the part of the hold the settlement gave back.
	Released int64 `json:"released"`
	// State is submitting, rejected, running, delivered, refunded, recovered or deleted.
	State string `json:"state"`
	// MoneyState is not_charged, charged or refunded.
	MoneyState string `json:"money_state"`
	// Attempts is how many attempts the work has had.
	Attempts int `json:"attempts"`
	// Reason says why a job was refunded or rejected: a code of the fixed vocabulary in
	// docs/api.md ("Reason codes"), such as timed_out or gpu_failed.
	Reason string `json:"reason,omitempty"`
	// Message is the sentence for the user.
	Message string `json:"message"`
}

// ResultReport is the body of POST /v1/jobs/{id}/result: a job's result landed, with the units
// its work used. It carries no amount: the server bills the usage at the job's recorded price.
type ResultReport struct {
	// Attempt is the attempt that produced the result.
	Attempt int `json:"attempt"`
	// OutputRef points at the result.
	OutputRef string `json:"output_ref"`
	// FinishedAt is when the work finished; the time the server receives the report when nil.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// UnitsUsed is how many units of the job's kind the work used (GPU-seconds for a metered
	// kind), from 0. Nil bills the whole hold; a usage above the hold is capped at it.
	UnitsUsed *int64 `json:"units_used,omitempty"`
}

// ResultAnswer is what the API did with a reported result.
type ResultAnswer struct {
	// Path is how the result reached the job: signal, fallback, recorded (applied once the
	// server's workflow service is reachable) or already_applied.
	Path string `json:"path"`
	// Outcome, for the fallback, says whether this report billed the job.
	Outcome string `json:"outcome,omitempty"`
	// Status is the job as it stood when the report was taken; after a signal it may predate
	// the settlement, so read [Client.Status] for the settled figures.
	Status Status `json:"status"`
	// Message says what happened, in a sentence.
	Message string `json:"message"`
}

// Price is one version of a kind's price on the server's price list.
type Price struct {
	// Kind names what is sold.
	Kind string `json:"kind"`
	// Version counts the kind's prices from 1.
	Version int `json:"version"`
	// Unit is what the kind is sold by: "job" (a fixed price) or "gpu_second" (metered).
	Unit string `json:"unit"`
	// UnitPrice is the credits one unit costs.
	UnitPrice int64 `json:"unit_price"`
	// MaxUnits is the most units one job may use, which its charge holds (1 for "job").
	MaxUnits int64 `json:"max_units"`
	// Memo says why the price was set.
	Memo string `json:"memo"`
	// CreatedAt is when this version was set.
	CreatedAt time.Time `json:"created_at"`
}

// Hold is what a job of this price holds when it asks for no smaller maximum of units.
func (p Price) Hold() int64 { return p.UnitPrice * p.MaxUnits }

// APIError is an error answer of the API.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int `json:"-"`
	// Code, Message, MoneyState and State are the API's error shape.
	Code       string `json:"code"`
	Message    string `json:"message"`
	MoneyState string `json:"money_state,omitempty"`
	State      string `json:"state,omitempty"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("jobbill API: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// The ends of a submission that are not a settled job. Each message says where the money is.
var (
	// ErrDeleted means the job was accepted and later deleted. It is never resubmitted.
	ErrDeleted = errors.New("the job's record was deleted; its money stays as it was. Submit a new job (a new charge) only if the user asks")
	// ErrNotReceived means the server never received the submission within ConfirmWindow.
	ErrNotReceived = errors.New("not received by the server, not charged; please retry")
	// ErrInsufficientCredits means the job was rejected; nothing was charged.
	ErrInsufficientCredits = errors.New("insufficient credits: the job was not started and nothing was charged")
)

// Clock is the time source, injected so tests can move it.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// After fires once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Client talks to one jobbill API with one key. Its zero-valued optional fields take defaults.
type Client struct {
	// BaseURL is the API's base URL (http://127.0.0.1:8080).
	BaseURL string
	// Key is the bearer API key's secret. Its scope decides what the client may call: a customer
	// key submits and follows its account's jobs; only a runner (or admin) key reports results.
	Key string
	// HTTP is the HTTP client; one with a 60 s timeout when nil (a submission waits for its
	// charge decision).
	HTTP *http.Client
	// Clock is the time source; the real clock when nil.
	Clock Clock
	// PollInterval is the wait between two looks at a job; 1 s when zero.
	PollInterval time.Duration
	// SubmitAttempts is how often one submission is sent while it fails transiently before it is
	// left unknown and confirmed by polling; 3 when zero.
	SubmitAttempts int
}

func (c *Client) clock() Clock {
	if c.Clock == nil {
		return realClock{}
	}
	return c.Clock
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return &http.Client{Timeout: 60 * time.Second}
	}
	return c.HTTP
}

func (c *Client) interval() time.Duration {
	if c.PollInterval <= 0 {
		return time.Second
	}
	return c.PollInterval
}

// Track starts tracking a new submission: it saves the body and the creation time. The caller
// generates the job ID once, and persists the Tracked if it must survive a restart.
func (c *Client) Track(req JobRequest) *Tracked {
	return &Tracked{Request: req, CreatedAt: c.clock().Now(), State: Unknown}
}

// Run is the whole flow for one job: submit, then poll until it is settled. It answers the
// settled status, or ErrDeleted, ErrNotReceived, ErrInsufficientCredits, an *APIError, or ctx's
// error (the job is then still tracked: poll it again later, never resubmit under a new ID).
func (c *Client) Run(ctx context.Context, t *Tracked) (Status, error) {
	st, err := c.Submit(ctx, t)
	switch {
	case err != nil:
		return st, err
	case t.State == Accepted && Decide(*t, Observation{StatusCode: http.StatusOK, State: st.State}, c.clock().Now()) == Done:
		return st, nil
	}
	return c.Poll(ctx, t)
}

// Submit sends the saved body, retrying transient failures under the same ID up to
// SubmitAttempts times. When every attempt failed transiently it returns no error and leaves
// t.State unknown: [Client.Poll] then confirms whether the submission arrived. A tracked
// submission that was accepted is never sent again.
func (c *Client) Submit(ctx context.Context, t *Tracked) (Status, error) {
	if t.State == Accepted {
		if t.Last != nil {
			return *t.Last, nil
		}
		return Status{}, nil
	}
	attempts := c.SubmitAttempts
	if attempts <= 0 {
		attempts = 3
	}
	for i := range attempts {
		st, done, err := c.post(ctx, t)
		if done || err != nil {
			return st, err
		}
		if i < attempts-1 {
			if err := c.sleep(ctx); err != nil {
				return Status{}, err
			}
		}
	}
	return Status{}, nil
}

// post sends the submission once. done reports an answer that settles the submission's fate
// (accepted, or refused for good); a transient failure is neither done nor an error.
func (c *Client) post(ctx context.Context, t *Tracked) (Status, bool, error) {
	body, err := json.Marshal(t.Request)
	if err != nil {
		return Status{}, true, err
	}
	code, data, err := c.do(ctx, http.MethodPost, "/v1/jobs", body)
	if err != nil {
		if ctx.Err() != nil {
			return Status{}, true, ctx.Err()
		}
		return Status{}, false, nil
	}
	if transient(code) {
		return Status{}, false, nil
	}
	switch code {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		var sub struct {
			Status Status `json:"status"`
		}
		if err := json.Unmarshal(data, &sub); err != nil {
			return Status{}, true, fmt.Errorf("jobbill API: unreadable answer to a submission: %w", err)
		}
		t.State, t.Last = Accepted, &sub.Status
		return sub.Status, true, nil
	case http.StatusPaymentRequired:
		t.State = Accepted
		st := Status{JobID: t.Request.JobID, AccountID: t.Request.AccountID, Kind: t.Request.Kind, State: "rejected", MoneyState: "not_charged"}
		t.Last = &st
		return st, true, ErrInsufficientCredits
	case http.StatusGone:
		t.State = Accepted
		return Status{}, true, ErrDeleted
	}
	return Status{}, true, apiError(code, data)
}

// Poll looks at the job every PollInterval and follows [Decide] until it is settled, deleted,
// not received, or refused; ctx bounds it.
func (c *Client) Poll(ctx context.Context, t *Tracked) (Status, error) {
	for {
		obs, st, apiErr := c.look(ctx, t.Request.JobID)
		if ctx.Err() != nil {
			return Status{}, ctx.Err()
		}
		if obs.StatusCode == http.StatusOK {
			t.State, t.Last = Accepted, &st
		}
		switch Decide(*t, obs, c.clock().Now()) {
		case Done:
			if st.State == "rejected" {
				return st, ErrInsufficientCredits
			}
			return st, nil
		case Deleted:
			return st, ErrDeleted
		case NotReceived:
			return Status{}, ErrNotReceived
		case Fail:
			return Status{}, apiErr
		case Resubmit:
			t.Resubmissions++
			if _, _, err := c.post(ctx, t); err != nil {
				if errors.Is(err, ErrDeleted) || errors.Is(err, ErrInsufficientCredits) {
					return Status{}, err
				}
				var ae *APIError
				if errors.As(err, &ae) {
					return Status{}, err
				}
			}
		case KeepPolling, Wait:
		}
		if err := c.sleep(ctx); err != nil {
			return Status{}, err
		}
	}
}

// Status reads a job once (GET /v1/jobs/{id}); 404 and 410 are *APIError with codes
// not_received and deleted.
func (c *Client) Status(ctx context.Context, jobID string) (Status, error) {
	obs, st, apiErr := c.look(ctx, jobID)
	switch {
	case obs.Err != nil:
		return Status{}, obs.Err
	case obs.StatusCode != http.StatusOK:
		return Status{}, apiErr
	}
	return st, nil
}

// ReportResult reports that a job's result landed (POST /v1/jobs/{id}/result), with the units
// its work used. It takes a runner key (the GPU service's) or an admin key: the usage decides what
// the job costs, so a customer key is refused (403). Reporting the same result again is harmless
// (path already_applied). A refusal is an *APIError; nothing was written.
func (c *Client) ReportResult(ctx context.Context, jobID string, r ResultReport) (ResultAnswer, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return ResultAnswer{}, err
	}
	var answer ResultAnswer
	err = c.call(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(jobID)+"/result", body, &answer, http.StatusOK, http.StatusAccepted)
	return answer, err
}

// Prices reads the price list (GET /v1/prices): each kind's current price, what a job submitted
// now holds and costs. Any key may read it.
func (c *Client) Prices(ctx context.Context) ([]Price, error) {
	var list struct {
		Prices []Price `json:"prices"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/prices", nil, &list, http.StatusOK)
	return list.Prices, err
}

// PriceHistory reads every version of a kind's price, oldest first (GET /v1/prices/{kind}); a
// job's PriceVersion names the one it was charged at. A kind never priced is an *APIError with
// code unknown_kind.
func (c *Client) PriceHistory(ctx context.Context, kind string) ([]Price, error) {
	var history struct {
		Versions []Price `json:"versions"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/prices/"+url.PathEscape(kind), nil, &history, http.StatusOK)
	return history.Versions, err
}

// call makes one request and decodes an answer of one of the ok statuses into out; any other
// status is an *APIError.
func (c *Client) call(ctx context.Context, method, path string, body []byte, out any, ok ...int) error {
	code, data, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	for _, want := range ok {
		if code == want {
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("jobbill API: unreadable answer to %s %s: %w", method, path, err)
			}
			return nil
		}
	}
	return apiError(code, data)
}

func (c *Client) look(ctx context.Context, jobID string) (Observation, Status, *APIError) {
	code, data, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(jobID), nil)
	if err != nil {
		return Observation{Err: err}, Status{}, nil
	}
	obs := Observation{StatusCode: code}
	if code != http.StatusOK {
		ae := apiError(code, data)
		var st Status
		if code == http.StatusGone {
			st = Status{JobID: jobID, State: ae.State, MoneyState: ae.MoneyState, Message: ae.Message}
		}
		return obs, st, ae
	}
	var st Status
	if err := json.Unmarshal(data, &st); err != nil {
		// An unreadable 200 is treated like a network error: look again.
		return Observation{Err: err}, Status{}, nil
	}
	obs.State = st.State
	return obs, st, nil
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, data, nil
}

func apiError(code int, data []byte) *APIError {
	e := &APIError{StatusCode: code}
	if json.Unmarshal(data, e) != nil || e.Code == "" {
		e.Code, e.Message = "http_"+fmt.Sprint(code), http.StatusText(code)
	}
	return e
}

func (c *Client) sleep(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.clock().After(c.interval()):
		return nil
	}
}
