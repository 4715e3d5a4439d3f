package workflows

import (
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
)

// refundCause is why a job's work will not be delivered: the code its customer is told, and the
// operator's words for the refund's detail, the step's summary and the run's details.
type refundCause struct {
	reason ledgerdb.Reason
	detail string
}

// failureCause says why the work failed for good — the code a customer reads and the words an
// operator reads — and how many attempts it had. The code comes from the error's kind (a timeout,
// the runner's failure, whose details carry the runner's own code, a cancellation), never from its
// words. The attempt count comes from the last heartbeat a timeout carries or the failure's
// details, and otherwise from the retry policy when it ran out.
func failureCause(err error, lastAttempt int32) (refundCause, int) {
	attempts := 0
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) && actErr.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED {
		attempts = int(lastAttempt)
	}
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		var last int
		if timeoutErr.HasLastHeartbeatDetails() && timeoutErr.LastHeartbeatDetails(&last) == nil {
			attempts = max(attempts, last)
		}
		return refundCause{ledgerdb.ReasonTimedOut, "timed out" + afterAttempts(attempts)}, attempts
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		reason := ledgerdb.ReasonGPUFailed
		var f activities.WorkFailure
		if appErr.HasDetails() && appErr.Details(&f) == nil {
			attempts = max(attempts, f.Attempt)
			if ledgerdb.ValidateRefundReason(f.Reason) == nil {
				// A code the ledger would refuse must not block the refund: gpu_failed stands.
				reason = f.Reason
			}
		}
		msg := ledgerdb.ScrubText(appErr.Message())
		if appErr.NonRetryable() || appErr.Type() == activities.ErrorTypeWorkFailedPermanently {
			return refundCause{reason, fmt.Sprintf("failed for good%s: %s", afterAttempts(attempts), msg)}, attempts
		}
		return refundCause{reason, fmt.Sprintf("failed%s: %s", afterAttempts(attempts), msg)}, attempts
	}
	reason := ledgerdb.ReasonInterrupted
	var canceledErr *temporal.CanceledError
	if errors.As(err, &canceledErr) {
		reason = ledgerdb.ReasonStoppedByOperator
	}
	return refundCause{reason, fmt.Sprintf("failed%s: %s", afterAttempts(attempts), ledgerdb.ScrubText(err.Error()))}, attempts
}

func afterAttempts(n int) string {
	switch {
	case n <= 0:
		return ""
	case n == 1:
		return " after 1 attempt"
	}
	return fmt.Sprintf(" after %d attempts", n)
}
