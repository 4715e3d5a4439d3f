package activities

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/jobbill/jobbill/ledgerdb"
)

// WorkRequest is one attempt of a job's GPU work.
type WorkRequest struct {
	// JobID is the client's job ID.
	JobID string
	// AccountID is the job's account: job IDs belong to their account.
	AccountID string
	// Attempt is the attempt number over the job's whole life, from 1. RunWork sets it to
	// PriorAttempts plus Temporal's attempt counter, so callers leave it zero.
	Attempt int
	// PriorAttempts is how many attempts the job's work had before this run of the activity: a
	// redrive continues the count, so attempt numbers never repeat within a job (a GPU service
	// may deduplicate on job and attempt).
	PriorAttempts int
	// InputRef points at the job's input (a URL, an object key); the work reads it from there.
	InputRef string
	// MaxUnits, for a kind metered by the GPU-second, is the units the job's charge holds: the
	// most the work may use, because the most it is billed (the ledger caps a reported usage at
	// it). The runner passes it on to the GPU service, which must stop the work there; 0 for a
	// kind sold by the job, and in runs recorded before the work was told.
	MaxUnits int64 `json:",omitempty"`
}

// Job names the job whose work this is.
func (r WorkRequest) Job() ledgerdb.JobKey {
	return ledgerdb.JobKey{AccountID: r.AccountID, JobID: r.JobID}
}

// accountOfWorkflowID reads the account from a job's workflow ID, "job/<account>/<job>"
// (workflows.JobWorkflowID, which this package cannot import); "" for any other ID.
func accountOfWorkflowID(workflowID string) string {
	rest, ok := strings.CutPrefix(workflowID, "job/")
	if !ok {
		return ""
	}
	account, _, _ := strings.Cut(rest, "/")
	return account
}

// WorkResult is what a finished attempt produced.
type WorkResult struct {
	// Attempt is the attempt that produced the result.
	Attempt int
	// OutputRef points at the job's output.
	OutputRef string
	// FinishedAt is when the work finished, by the runner's clock.
	FinishedAt time.Time
	// UnitsUsed is how many units of the job's kind the work used — GPU-seconds for a metered
	// kind — as the GPU side measured it; nil when it did not say, and the job is then billed
	// its whole hold. The ledger caps it at the hold.
	UnitsUsed *int64 `json:",omitempty"`
}

// Runner runs one attempt of a job's GPU work. Run must return soon after ctx is done (Temporal
// cancelled the attempt, or its StartToClose deadline passed) with ctx's error; work that keeps
// going on the GPU side after that reports its result through a [LateResultReporter].
type Runner interface {
	// Run works one attempt and returns its result, or why it failed.
	Run(ctx context.Context, req WorkRequest) (WorkResult, error)
}

// LateResultReporter takes a result that arrived after its attempt was given up: the attempt's
// deadline passed, or the workflow already refunded the job. The job service implements it by
// signalling the job's workflow with the result, or, if the workflow has closed, with a guarded
// reclaim of its own.
type LateResultReporter interface {
	// ReportLateResult settles a result of the job that arrived after its attempt was given up.
	ReportLateResult(ctx context.Context, job ledgerdb.JobKey, result WorkResult) error
}

// LateResultReporterFunc adapts a function to [LateResultReporter].
type LateResultReporterFunc func(ctx context.Context, job ledgerdb.JobKey, result WorkResult) error

// ReportLateResult calls f.
func (f LateResultReporterFunc) ReportLateResult(ctx context.Context, job ledgerdb.JobKey, result WorkResult) error {
	return f(ctx, job, result)
}

// ErrWorkPermanent, wrapped by a Runner's error, says that no retry can make the work succeed
// (for instance the input is unreadable). RunWork then fails with a non-retryable
// [ErrorTypeWorkFailedPermanently] error and the workflow refunds without waiting for retries.
var ErrWorkPermanent = errors.New("the work can never succeed")

// ErrInvalidResult, wrapped by a Runner's error, says that the GPU service answered something
// jobbill cannot bill (a negative usage, an unknown status, an unreadable answer), rather than
// that the work failed. A job refunded for it tells its customer ledgerdb.ReasonInvalidResult.
var ErrInvalidResult = errors.New("the GPU service's answer cannot be billed")

// WorkFailure is the details of a failed attempt's application error.
type WorkFailure struct {
	// Attempt is the attempt that failed.
	Attempt int
	// Message is the runner's error, scrubbed of credentials (ledgerdb.ScrubText): it is kept
	// in Temporal's history and shown to operators, never to a customer.
	Message string
	// Reason is the code a customer is told if the job is refunded for this failure:
	// ledgerdb.ReasonGPUFailed or ledgerdb.ReasonInvalidResult. Empty in the failures of
	// attempts recorded before the codes, which read as gpu_failed.
	Reason ledgerdb.Reason `json:",omitempty"`
}

// defaultHeartbeatEvery is how often RunWork heartbeats when the attempt has no heartbeat timeout.
// Heartbeats are also how a cancellation reaches a running activity, so they never stop.
const defaultHeartbeatEvery = 10 * time.Second

// RunWork runs one attempt of the job's work through the Runner. It records the attempt on the
// job row (best effort: the count is for people, not for money), heartbeats the attempt number
// while the runner works, so that a timeout carries it back to the workflow as the last heartbeat
// details, and returns as soon as Temporal cancels the attempt.
func (a *Activities) RunWork(ctx context.Context, req WorkRequest) (WorkResult, error) {
	info := activity.GetInfo(ctx)
	req.Attempt = req.PriorAttempts + int(info.Attempt)
	if req.AccountID == "" {
		// Scheduled by a release that did not carry the account yet: the workflow ID names it.
		req.AccountID = accountOfWorkflowID(info.WorkflowExecution.ID)
	}
	logger := activity.GetLogger(ctx)
	if _, err := a.Ledger.RecordAttempt(ctx, req.Job(), req.Attempt); err != nil {
		logger.Warn("Recording the attempt failed; running the work anyway.", "Job", req.Job().String(), "Attempt", req.Attempt, "Error", err)
	}

	every := defaultHeartbeatEvery
	if info.HeartbeatTimeout > 0 {
		// Well inside the timeout; the SDK throttles the calls that actually reach the server.
		every = info.HeartbeatTimeout / 3
	}
	heartbeat := func() { activity.RecordHeartbeat(ctx, req.Attempt) }
	res, err := runWithHeartbeats(ctx, a.Runner, req, every, heartbeat)
	if err == nil {
		if res.Attempt == 0 {
			res.Attempt = req.Attempt
		}
		return res, nil
	}
	if ctx.Err() != nil {
		// Cancelled or timed out: Temporal already knows which, and ctx's error says so.
		return WorkResult{}, ctx.Err()
	}
	return WorkResult{}, workFailed(err, req.Attempt)
}

// workFailed is the application error of an attempt whose runner failed with err. The runner's
// words go to Temporal's history, its UI and the worker's log, so they are scrubbed of
// credentials first, and the raw error is not kept as the cause: a GPU service's error may carry
// a database URL with its password.
func workFailed(err error, attempt int) error {
	errType, nonRetryable := ErrorTypeWorkFailed, false
	if errors.Is(err, ErrWorkPermanent) {
		errType, nonRetryable = ErrorTypeWorkFailedPermanently, true
	}
	reason := ledgerdb.ReasonGPUFailed
	if errors.Is(err, ErrInvalidResult) {
		reason = ledgerdb.ReasonInvalidResult
	}
	message := ledgerdb.ScrubText(err.Error())
	return temporal.NewApplicationErrorWithOptions(message, errType, temporal.ApplicationErrorOptions{
		NonRetryable: nonRetryable,
		Details:      []any{WorkFailure{Attempt: attempt, Message: message, Reason: reason}},
	})
}

// runWithHeartbeats runs the runner in its own goroutine and heartbeats until it returns or ctx
// is done. It does not wait for a runner that ignores ctx: the attempt is over for Temporal, and a
// result that still comes is the runner's to report as late.
func runWithHeartbeats(ctx context.Context, r Runner, req WorkRequest, every time.Duration, heartbeat func()) (WorkResult, error) {
	type answer struct {
		res WorkResult
		err error
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan answer, 1) // buffered: a runner that returns after we gave up must not block
	go func() {
		res, err := r.Run(runCtx, req)
		done <- answer{res, err}
	}()

	heartbeat() // at once, so even a short attempt leaves its number for a timeout to carry
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case ans := <-done:
			return ans.res, ans.err
		case <-ticker.C:
			heartbeat()
		case <-ctx.Done():
			// An answer that arrived with the deadline is still the work's answer.
			select {
			case ans := <-done:
				return ans.res, ans.err
			default:
			}
			return WorkResult{}, ctx.Err()
		}
	}
}
