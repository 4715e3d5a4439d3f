package api

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/api/serviceerror"
)

// TestTimedOutKnowsTemporalsDeadline checks what a submission that ran out of time is told: the
// job was received and its charge is still being decided (202), never "could not be started"
// (503) — whether the request's own context said so first, or Temporal did, with the deadline the
// SDK passed on in a gRPC status a moment before that context expired (seen on CI: a 503 where a
// 202 was due). Any other failure is not a timeout.
func TestTimedOutKnowsTemporalsDeadline(t *testing.T) {
	for name, c := range map[string]struct {
		err  error
		want bool
	}{
		"the request's deadline":  {fmt.Errorf("job x: starting its workflow: %w", context.DeadlineExceeded), true},
		"the request cancelled":   {context.Canceled, true},
		"Temporal's deadline":     {fmt.Errorf("job x: starting its workflow: %w", serviceerror.NewDeadlineExceeded("context deadline exceeded")), true},
		"Temporal's cancellation": {serviceerror.NewCanceled("canceled"), true},
		"Temporal unavailable":    {serviceerror.NewUnavailable("connection refused"), false},
		"anything else":           {errors.New("boom"), false},
	} {
		if got := timedOut(c.err); got != c.want {
			t.Errorf("%s: timedOut(%v) = %v, want %v", name, c.err, got, c.want)
		}
	}
}
