// Package apiclient is a Go client of jobbill's HTTP API that follows the submission rules
// (docs/design.md, "Submission"; the client's decision table is in docs/api.md), so product code
// cannot get a paid job's state wrong:
//
//   - A submission names the job's kind, never an amount: the server sets prices, and its price
//     list ([Client.Prices]) says what a job of each kind holds and costs.
//   - A job ID is made once, by [NewJobID], and a submission is retried under that same ID, with
//     the same saved body — never a new ID, so never a second paid job.
//   - A submission whose answer was lost is confirmed by GET. Only the API's own not_received
//     404 means it never arrived and nothing was charged; it is resubmitted (same ID, same body)
//     at most MaxResubmissions times, and after ConfirmWindow from its creation the user is told
//     "not received by the server, not charged".
//   - 408, 429, 5xx, network errors and answers that are not the API's (a proxy's 404, a path
//     the API does not serve, a body that is not the API's error) are transient: the client
//     asks again under the same ID, spaced by [Backoff] and never sooner than a Retry-After.
//     Submitting or an unknown state means keep polling the same ID.
//   - A 410, or the API's not_received 404 for an ID that was once accepted, means the job was
//     deleted: never resubmitted, and its money state is the one the answer carries, or
//     [MoneyUnknown] — never "not charged" unless the API said so.
//
// [Decide] and [OnNotFound] hold the rules as pure functions; [Client] applies them. The client
// also lists, reads and deletes jobs ([Client.ListJobs], [Client.Status], [Client.DeleteJob]) and
// reads accounts ([Client.Balance], [Client.Ledger]).
//
// The bodies it sends and the answers it decodes are package apitype's, the types the server
// answers with, held to api/openapi.yaml by the API's tests; the client keeps none of its own.
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
	"slices"
	"strings"
	"time"

	"github.com/jobbill/jobbill/apitype"
)

// MoneyUnknown is the money state of an answer that does not say where the money stands: the
// client cannot tell, so it says so rather than guess "not charged".
const MoneyUnknown = "unknown"

// APIError is an error answer: the API's error shape, or, for an answer that is not the API's
// (a proxy's page, an empty body), the code http_<status> with money state [MoneyUnknown].
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code, Message, MoneyState and State are the API's error shape ([apitype.Error]).
	Code       string
	Message    string
	MoneyState string
	State      string
	// RetryAfter is the wait a 429 or 503 asked for with Retry-After, uncapped (a caller that
	// retries by itself caps it, as [Backoff] does); 0 when none.
	RetryAfter time.Duration
	// notAPI marks an answer whose body was not the API's error shape.
	notAPI bool
	// is is the client's own error the answer means, where a call knows one (a result's 409
	// conflict is [ErrResultConflict]); nil otherwise.
	is error
}

// Unwrap lets errors.Is match the client's own error the answer means, such as
// [ErrResultConflict].
func (e *APIError) Unwrap() error { return e.is }

// FromAPI reports whether the answer was the API's own error (a JSON body with a code), whose
// code and money state can be believed; an answer from a proxy or a misrouted request is not.
func (e *APIError) FromAPI() bool { return !e.notAPI }

// Error says the status, the code and the API's sentence.
func (e *APIError) Error() string {
	return fmt.Sprintf("jobbill API: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// The ends of a submission that are not a settled job. Each message says where the money is.
var (
	// ErrDeleted means the job was accepted and later deleted. It is never resubmitted.
	ErrDeleted = errors.New("the job was deleted; deleting moved no money, and a refunded job's late result may still take its refund back: the answer's money state says where it stands. Submit a new job (a new charge) only if the user asks")
	// ErrNotReceived means the server never received the submission within ConfirmWindow.
	ErrNotReceived = errors.New("not received by the server, not charged; please retry")
	// ErrInsufficientCredits means the job was rejected; nothing was charged.
	ErrInsufficientCredits = errors.New("insufficient credits: the job was not started and nothing was charged")
	// ErrResultConflict means the attempt already reported a different result (another output or
	// usage): the first result stands, and nothing was charged again. [Client.ReportResult]
	// answers it as an *APIError that matches it with errors.Is; sending the report again never
	// changes the answer.
	ErrResultConflict = errors.New("this attempt already reported a different result; the first result stands and nothing was charged again")
	// ErrInvalidInput means the client refused a call's arguments before sending anything (an
	// empty ID, a negative limit …); the error's text says which.
	ErrInvalidInput = errors.New("jobbill client: invalid input, nothing was sent")
)

// Clock is the time source and the sleeper, injected so tests can move time and measure every
// wait without taking it.
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
// It is safe for concurrent use as long as its fields are not changed.
type Client struct {
	// BaseURL is the API's base URL (http://127.0.0.1:8080).
	BaseURL string
	// Key is the bearer API key's secret. Its scope decides what the client may call: a customer
	// key submits and follows its account's jobs; only a runner (or admin) key reports results.
	Key string
	// AccountID, when set, is sent as the account_id query parameter of the job routes that
	// name no account of their own (ListJobs, Status, DeleteJob, ReportResult): job IDs belong to
	// their account, and a runner or admin key must say which one it acts for; a customer key
	// implies its own. A tracked job ([Client.Run], [Client.Poll]) is always looked at in its own
	// account, the one its body names.
	AccountID string
	// HTTP is the HTTP client; one with a 60 s timeout when nil (a submission waits for its
	// charge decision).
	HTTP *http.Client
	// Clock is the time source and the client's only way to wait; the real clock when nil.
	Clock Clock
	// PollInterval is the wait between two looks at a job that is still being worked on; 1 s when
	// zero. A look that failed transiently is followed by a [Backoff] wait instead.
	PollInterval time.Duration
	// SubmitAttempts is how often one submission is sent while it fails transiently before it is
	// left unknown and confirmed by polling; 3 when zero.
	SubmitAttempts int
	// Backoff spaces the retries of transient failures; its zero value takes its defaults.
	Backoff Backoff
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

// wait waits d on the client's clock, or until ctx is done.
func (c *Client) wait(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.clock().After(d):
		return nil
	}
}

// answer is one HTTP answer as the client reads it.
type answer struct {
	code int
	body []byte
	// retryAfter is the wait a 429 or 503 asked for with Retry-After; 0 when it asked for none.
	retryAfter time.Duration
}

// jobQuery is the query of a job route: account_id, the account the request acts for — the
// given one, or else the client's — when either names one.
func (c *Client) jobQuery(account string) url.Values {
	q := url.Values{}
	if account = or(account, c.AccountID); account != "" {
		q.Set("account_id", account)
	}
	return q
}

// do sends one request and reads its answer (at most 1 MiB of it).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	target := strings.TrimRight(c.BaseURL, "/") + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return answer{}, err
	}
	a := answer{code: resp.StatusCode, body: data}
	if a.code == http.StatusTooManyRequests || a.code == http.StatusServiceUnavailable {
		a.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), c.clock().Now())
	}
	return a, nil
}

// call makes one request and decodes an answer of one of the ok statuses into out; any other
// status is an *APIError.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body []byte, out any, ok ...int) error {
	a, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	if slices.Contains(ok, a.code) {
		if err := json.Unmarshal(a.body, out); err != nil {
			return fmt.Errorf("jobbill API: unreadable answer to %s %s: %w", method, path, err)
		}
		return nil
	}
	return a.apiError()
}

// apiError reads an error answer. A body that is not the API's error shape (not JSON, or JSON
// without a code) did not come from the API's handlers: its code is http_<status> and its money
// state [MoneyUnknown].
func (a answer) apiError() *APIError {
	var body apitype.Error
	if json.Unmarshal(a.body, &body) != nil || body.Code == "" {
		return &APIError{StatusCode: a.code, Code: fmt.Sprintf("http_%d", a.code), Message: http.StatusText(a.code),
			MoneyState: MoneyUnknown, RetryAfter: a.retryAfter, notAPI: true}
	}
	return &APIError{StatusCode: a.code, Code: body.Code, Message: body.Message, MoneyState: body.MoneyState, State: body.State,
		RetryAfter: a.retryAfter}
}

// pathID is an ID as a path segment; an empty one is refused before anything is sent.
func pathID(field, id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%w: the %s must not be empty", ErrInvalidInput, field)
	}
	return url.PathEscape(id), nil
}
