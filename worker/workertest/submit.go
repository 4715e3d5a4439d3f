package workertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

// Submit submits job through st as product code does, and waits out the documented "poll again"
// answer. A submission whose charge is still being decided when Submit answers — state submitting,
// money pending: the HTTP API's 202 — has failed at nothing: its workflow decides the charge when
// its turn comes, which under load may take longer than Submit's own wait. So its job is polled
// until it leaves submitting, for as long as ctx allows (the test's own deadline: no margin of
// Submit's that load could eat), and then answered as a submission decided at once is: the job as
// it stands, and for a rejected job an error that matches ledgerdb.ErrRejected (and
// ledgerdb.ErrInsufficientCredits when that was why). Every test that submits through the job
// service submits through this.
func Submit(ctx context.Context, t testing.TB, st *jobs.Service, job jobs.Job) (jobs.Submission, error) {
	t.Helper()
	sub, err := st.Submit(ctx, job)
	if err != nil || sub.Status.State != ledgerdb.StateSubmitting {
		return sub, err
	}
	t.Logf("job %s: its charge was still being decided when the submission answered; polling it", job.Key())
	if sub.Status, err = st.Wait(ctx, job.Key(), decided...); err != nil {
		return sub, fmt.Errorf("waiting for the charge decision of job %s: %w", job.Key(), err)
	}
	return sub, rejection(sub.Status)
}

// decided are the states a job leaves submitting for: every state but submitting.
var decided = func() []ledgerdb.State {
	var out []ledgerdb.State
	for _, s := range ledgerdb.States {
		if s != ledgerdb.StateSubmitting {
			out = append(out, s)
		}
	}
	return out
}()

// rejection is the error Submit answers beside a rejected job, as the job service's own.
func rejection(st jobs.Status) error {
	switch {
	case st.State != ledgerdb.StateRejected:
		return nil
	case st.Reason == ledgerdb.ReasonInsufficientCredits:
		return fmt.Errorf("job %s was rejected (%s): %w: %w", st.Key(), st.Reason, ledgerdb.ErrRejected, ledgerdb.ErrInsufficientCredits)
	}
	return fmt.Errorf("job %s was rejected (%s): %w", st.Key(), st.Reason, ledgerdb.ErrRejected)
}
