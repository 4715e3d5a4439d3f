package workflows

import (
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
)

// failureReason says why the work failed for good, in words for the refund's reason and summary,
// and how many attempts it had. The attempt count comes from the last heartbeat a timeout carries
// or the failure's details, and otherwise from the retry policy when it ran out.
func failureReason(err error, lastAttempt int32) (string, int) {
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
		return "timed out" + afterAttempts(attempts), attempts
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		var f activities.WorkFailure
		if appErr.HasDetails() && appErr.Details(&f) == nil {
			attempts = max(attempts, f.Attempt)
		}
		msg := shorten(appErr.Message())
		if appErr.NonRetryable() || appErr.Type() == activities.ErrorTypeWorkFailedPermanently {
			return fmt.Sprintf("failed for good%s: %s", afterAttempts(attempts), msg), attempts
		}
		return fmt.Sprintf("failed%s: %s", afterAttempts(attempts), msg), attempts
	}
	return fmt.Sprintf("failed%s: %s", afterAttempts(attempts), shorten(err.Error())), attempts
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

// shorten keeps a runner's message short enough for a refund reason and a one-line summary. The
// message comes from a GPU service and may be anything, and a refused reason must never block a
// refund: ledgerdb.ClipText makes it fit.
func shorten(s string) string { return ledgerdb.ClipText(s) }
