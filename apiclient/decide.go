package apiclient

import (
	"net/http"
	"time"

	"github.com/jobbill/jobbill/apitype"
)

// The limits of the confirmation rule.
const (
	// ConfirmWindow is how long, from a submission's creation, a 404 is taken for "still on its
	// way" rather than "never arrived".
	ConfirmWindow = 5 * time.Minute
	// MaxResubmissions is how often a submission the server never received is sent again, with
	// the same ID and the saved body.
	MaxResubmissions = 3
)

// SubmissionState is what the client knows of a submission.
type SubmissionState string

const (
	// Unknown means no answer has shown that the server holds the ID: the POST may be lost, or
	// its answer may be.
	Unknown SubmissionState = "unknown"
	// Accepted means the server has answered for the ID at least once. From then on the ID is
	// never resubmitted: a 404 can only mean the record was deleted.
	Accepted SubmissionState = "accepted"
)

// Action is what the client does after one look at a job.
type Action string

// The actions of [Decide] and [OnNotFound].
const (
	// KeepPolling: the job exists and is not settled, or the read said nothing about the job (408,
	// 429, 5xx, network, a 404 that is not the API's not_received). Poll the same ID again; never
	// create a new paid job.
	KeepPolling Action = "keep_polling"
	// Done: the job is settled (delivered, recovered, refunded or rejected).
	Done Action = "done"
	// Deleted: the job was accepted once and its record is gone (410, or the API's not_received
	// 404 after acceptance).
	// Never resubmit; the user decides whether to pay for a new job.
	Deleted Action = "deleted"
	// Resubmit: the ID never reached the server; send the saved body again under the same ID.
	Resubmit Action = "resubmit"
	// Wait: the ID has not arrived yet and there is nothing (left) to resubmit; look again later.
	Wait Action = "wait"
	// NotReceived: ConfirmWindow has passed and the server never received the ID: tell the user
	// "not received by the server, not charged".
	NotReceived Action = "not_received"
	// Fail: an answer no retry can change (400, 401, 403, 409 …).
	Fail Action = "fail"
)

// Tracked is a submission as the client remembers it — what product code persists next to its
// UI element, like the seed's node meta.
type Tracked struct {
	// Request is the saved body; it is sent again, unchanged, under the same ID.
	Request apitype.SubmitRequest `json:"request"`
	// CreatedAt is when the submission was first made, by the client's clock.
	CreatedAt time.Time `json:"created_at"`
	// State is unknown until the server has answered for the ID, then accepted forever.
	State SubmissionState `json:"state"`
	// Resubmissions counts the resubmissions made after a 404.
	Resubmissions int `json:"resubmissions"`
	// Last is the last status read, if any.
	Last *apitype.Status `json:"last,omitempty"`
}

// HasBody reports whether the saved body can be resubmitted.
func (t Tracked) HasBody() bool { return t.Request.JobID != "" && t.Request.AccountID != "" }

// OnNotFound is the submission rules' table for the API's not_received 404 on GET /v1/jobs/{id}
// (any other 404 says nothing about the job, see [Decide]):
//
//   - accepted once → deleted (a resubmission would be a second paid job);
//   - never accepted, ConfirmWindow past creation → not received, not charged;
//   - never accepted, a saved body and fewer than MaxResubmissions → resubmit with the same ID;
//   - otherwise → wait.
func OnNotFound(t Tracked, now time.Time) Action {
	switch {
	case t.State == Accepted:
		return Deleted
	case !now.Before(t.CreatedAt.Add(ConfirmWindow)):
		return NotReceived
	case t.HasBody() && t.Resubmissions < MaxResubmissions:
		return Resubmit
	}
	return Wait
}

// The API's error codes the rules read (api/errors.go). Only these answers speak about a job's
// submission; the same HTTP status without them came from something else.
const (
	// CodeNotReceived is the API's 404 for a job ID that never reached it: nothing was charged.
	CodeNotReceived = "not_received"
	// CodeDeleted is the API's 410 for a job ID whose job was deleted. Deleting moves no money; the
	// money state the answer carries says where it stands (a refunded job's late result may still
	// take its refund back).
	CodeDeleted = "deleted"
	// CodeInsufficientCredits is the API's 402: the job was rejected and nothing was charged.
	CodeInsufficientCredits = "insufficient_credits"
	// CodeConflict is the API's 409 for a request that contradicts an earlier one under the same
	// ID: a submission's different request, or, to a result report, a different result of the
	// same attempt ([ErrResultConflict]).
	CodeConflict = "conflict"
)

// Observation is one look at a job: a transport error, or an HTTP status with, for 200, the
// job's state and, for an error, the API's error code.
type Observation struct {
	// Err is a network error; the other fields are then empty.
	Err error
	// StatusCode is the HTTP status.
	StatusCode int
	// State is the job's state in a 200 answer.
	State string
	// Code is the API's error code (not_received, deleted …) when the answer's body is the API's
	// error shape; empty when it is not — a proxy's page, an empty body, JSON of another shape.
	Code string
}

// transient reports whether a look said nothing about the job: a network error, a status that
// says "ask again later" (408, 429, 5xx), or a 404 that is not the API's not_received — a proxy,
// a path the API does not serve (no_route), a body that is not the API's. Only the API's own
// answer may be read as "never arrived": taking a proxy's 404 for it would resubmit, or tell
// the user "not charged", about a job that may be running and charged.
func (o Observation) transient() bool {
	return o.Err != nil || transient(o.StatusCode) || (o.StatusCode == http.StatusNotFound && o.Code != CodeNotReceived)
}

// Decide is the whole polling rule: what to do after one look at a job. It is pure, so every
// row of the rule is table-tested.
func Decide(t Tracked, obs Observation, now time.Time) Action {
	switch code := obs.StatusCode; {
	case obs.transient():
		return KeepPolling
	case code == http.StatusOK:
		switch obs.State {
		case "delivered", "recovered", "refunded", "rejected":
			return Done
		case "deleted":
			return Deleted
		}
		// submitting, running, and any state this client does not know: the job exists, so
		// keep polling the same ID; slow is not failed.
		return KeepPolling
	case code == http.StatusGone:
		return Deleted
	case code == http.StatusNotFound: // the API's not_received: any other 404 is transient above
		return OnNotFound(t, now)
	}
	return Fail
}

// The money states the submission rules read ([OnSubmitted]).
const (
	moneyPending = "pending"
	moneyCharged = "charged"
)

// OnSubmitted is the submission rules' table for a POST /v1/jobs answered 200, 201 or 202 with the
// job it carries (docs/api.md, "Submission answers"): what the client does next, and the money state
// it reports. The API's status follows where the job's money stands — 201 only when it is charged,
// 202 while it is pending, 200 when the answer charges nothing (the same request again, or a job
// refunded before the answer) — so:
//
//   - a 201 whose job is charged, a 202 whose job is pending, and any 200: the answer stands.
//     Done once the job is settled (a 200 refunded, say), Deleted for a tombstone, KeepPolling
//     otherwise; the money state is the job's.
//   - a 201 whose job is not charged, or a 202 whose job is decided: the status says more than its
//     body, which the API never answers (a proxy's rewrite, a server of another version). Neither
//     is taken at its word: KeepPolling, so that a look by ID tells, and the money state is
//     unknown until it does — never "charged" on the status's word, nor the body's state on a
//     status that contradicts it.
func OnSubmitted(code int, st apitype.Status) (Action, string) {
	switch {
	case code == http.StatusCreated && st.MoneyState != moneyCharged,
		code == http.StatusAccepted && st.MoneyState != moneyPending:
		return KeepPolling, MoneyUnknown
	}
	return Decide(Tracked{State: Accepted}, Observation{StatusCode: http.StatusOK, State: st.State}, time.Time{}), st.MoneyState
}

// transient reports whether an HTTP status says "ask again later": 408, 429 and every 5xx.
func transient(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || (code >= 500 && code <= 599)
}
