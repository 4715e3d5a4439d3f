package chaos

// The injections the timeline fires: worker kills, restarts of the dev server (results reported
// while it is down) and of Postgres, orphaned placeholders, and an operator's terminate and reset.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// inject fires the run-wide injections at their planned offsets.
func (r *run) inject(ctx context.Context, timeline []timedInjection) {
	begin := time.Now()
	for _, t := range timeline {
		sleep(ctx, time.Until(begin.Add(t.at)))
		if ctx.Err() != nil {
			return
		}
		switch t.kind {
		case KindKillWorker:
			w := r.procs[t.worker]
			if pid, ok := w.kill(); ok {
				r.event(KindKillWorker, "worker %d (pid %d) SIGKILLed", w.id, pid)
			} else {
				r.event("skipped", "worker %d was not running; no SIGKILL", w.id)
			}
		case KindRestartTemporal:
			// On a loaded machine no candidate's submission may have answered yet at the planned
			// moment; a stop then would leave no result to report while the server is down.
			r.awaitAnswered(ctx, t.results)
			r.event(KindRestartTemporal, "stopping the dev server on %s", r.server.Address())
			began := time.Now()
			r.server.Stop()
			r.reportWhileDown(ctx, t.results)
			if err := r.server.Start(ctx); err != nil {
				r.anomaly("the dev server did not come back: %v", err)
				continue
			}
			r.logf("", "dev server back after %.1fs (pid %d)", time.Since(began).Seconds(), r.server.PID())
		case KindRestartPostgres:
			r.event(KindRestartPostgres, "%s", strings.Join(r.cfg.PostgresRestartCommand, " "))
			began := time.Now()
			outb, err := exec.CommandContext(ctx, r.cfg.PostgresRestartCommand[0], r.cfg.PostgresRestartCommand[1:]...).CombinedOutput()
			if err != nil {
				r.anomaly("restarting Postgres failed: %v: %s", err, strings.TrimSpace(string(outb)))
				continue
			}
			r.logf("", "Postgres back after %.1fs", time.Since(began).Seconds())
		case KindOrphan:
			id := r.orphanKey(t.orphan)
			err := r.retry(ctx, func(ctx context.Context) error {
				_, err := r.ledger.Submit(ctx, ledgerdb.Submission{JobID: id.JobID, AccountID: id.AccountID, Kind: fixedKind(7), Request: []byte("sim:ok")})
				return err
			})
			if err != nil {
				r.anomaly("writing orphan %s: %v", id, err)
				continue
			}
			r.event(KindOrphan, "%s: placeholder written, no workflow started (a submitter crashed)", id)
			r.faults.add("job:"+id.String(), "orphaned placeholder "+id.String(), time.Now().Add(r.cfg.PassGrace), r.leaves(id, ledgerdb.StateSubmitting))
		}
	}
}

// reportWhileDown reports, while the dev server is down, the results of the first OutageResults
// of candidates whose submission has answered, as a GPU service whose call cannot reach Temporal:
// the job service waits for Temporal for outageReportWait, then answers "recorded" — the result is
// in the ledger's inbox, and the scheduled pass must apply it once Temporal is back.
func (r *run) reportWhileDown(ctx context.Context, candidates []jobs.Job) {
	var results []jobs.Job
	r.mu.Lock()
	for _, job := range candidates {
		if r.submitted[job.ID] && len(results) < r.cfg.OutageResults {
			results = append(results, job)
		}
	}
	r.mu.Unlock()
	var all sync.WaitGroup
	for _, job := range results {
		all.Go(func() {
			// A report given outageReportWait answers recorded once its Temporal call gives up. On a
			// loaded machine the ledger's reads and the inbox write before that call can use the
			// whole wait; the GPU service then reports again, as it would after a timeout (the
			// inbox takes the same result once), until the ledger answers in time. The server
			// stays down until every report has answered.
			var rep jobs.ResultReport
			var err error
			for range outageReportTries {
				rctx, cancel := context.WithTimeout(ctx, outageReportWait)
				rep, err = r.st.ReportResult(rctx, job.Key(), resultOf(job))
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
					break
				}
			}
			switch {
			case err != nil:
				r.anomaly("reporting %s's result while Temporal was down: %v", job.ID, err)
			case rep.Path != jobs.PathRecorded:
				r.anomaly("reporting %s's result while Temporal was down answered %s, not %s", job.ID, rep.Path, jobs.PathRecorded)
			default:
				r.mu.Lock()
				r.recorded = append(r.recorded, job.Key())
				r.mu.Unlock()
				r.event(KindRecordedResult, "%s (%s) result reported while Temporal was down: %s (the ledger says %s)", job.ID, job.InputRef, rep.Path, rep.Status.State)
				key := job.Key()
				r.faults.add("result:"+key.String(), "result recorded for "+key.String(), time.Now().Add(r.cfg.PassResultGrace), r.resultApplied(key))
			}
		})
	}
	all.Wait()
}

// awaitAnswered waits until the submission of at least one of candidates has answered (its charge
// is decided, so a result can be reported for it), or until ctx ends. It waits on the event, not
// on a time, so that the stop has results to report however slow the machine is.
func (r *run) awaitAnswered(ctx context.Context, candidates []jobs.Job) {
	for ctx.Err() == nil {
		r.mu.Lock()
		for _, job := range candidates {
			if r.submitted[job.ID] {
				r.mu.Unlock()
				return
			}
		}
		r.mu.Unlock()
		sleep(ctx, 100*time.Millisecond)
	}
}

// outageReportWait is how long a report made while the dev server is down waits for Temporal
// before it answers "recorded".
const outageReportWait = 3 * time.Second

// outageReportTries is how many times a report made while Temporal is down is sent before its
// failure counts as an anomaly (each try waits outageReportWait).
const outageReportTries = 20

// orphanKey is the i-th orphan placeholder the run writes.
func (r *run) orphanKey(i int) ledgerdb.JobKey {
	return ledgerdb.JobKey{AccountID: r.accounts[i%richAccounts], JobID: fmt.Sprintf("%sorphan-%d", r.prefix, i)}
}

// terminate is the Temporal UI's Terminate button (TerminateWorkflow) pressed on the job's
// workflow while it runs. The job is then charged with no run to settle it until the reconcile
// pass or a read of its status heals it: refunded, or delivered or recovered if its result lands.
// A workflow that has closed already cannot be terminated; that is logged as skipped.
func (r *run) terminate(ctx context.Context, p jobPlan) {
	workflowID := workflows.JobWorkflowID(p.job.AccountID, p.job.ID)
	closed := false
	err := r.retry(ctx, func(ctx context.Context) error {
		err := r.tc.TerminateWorkflow(ctx, workflowID, "", "chaos: an operator pressed Terminate")
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			closed = true
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		r.anomaly("terminating %s: %v", p.job.ID, err)
	case closed:
		r.event("skipped", "%s (%s): its workflow had closed; nothing to terminate", p.job.ID, p.job.InputRef)
	default:
		state := "unknown"
		if job, err := r.ledger.Job(ctx, p.job.Key()); err == nil {
			state = string(job.State)
		}
		r.mu.Lock()
		r.terminated = append(r.terminated, p.job.Key())
		r.mu.Unlock()
		r.event(KindTerminate, "%s (%s) terminated while its workflow ran (the ledger says %s)", p.job.ID, p.job.InputRef, state)
		r.faults.add("job:"+p.job.Key().String(), "terminated job "+p.job.Key().String(), time.Now(), r.leaves(p.job.Key(), ledgerdb.StateRunning))
		if r.cfg.Reads {
			// A user polling the job: its first status read heals it.
			if _, err := r.waitSettled(ctx, p.job.Key()); err != nil {
				r.anomaly("terminated %s never settled while its status was read: %v", p.job.ID, err)
			}
		}
	}
}

// reset is an operator's reset of the job's running workflow to its first workflow task
// (ResetWorkflowExecution, as `temporal workflow reset --type FirstWorkflowTask` and the UI do):
// the new run starts the job over, its charge step included, which the ledger's guard must answer
// without a second charge. One request ID serves the retries of one reset, so a retried call is the
// same reset. A workflow that has closed is left alone and logged as skipped.
func (r *run) reset(ctx context.Context, p jobPlan) {
	workflowID := workflows.JobWorkflowID(p.job.AccountID, p.job.ID)
	requestID := newRequestID()
	var (
		runID   string
		skipped string
	)
	err := r.retry(ctx, func(ctx context.Context) error {
		skipped = ""
		desc, err := r.tc.DescribeWorkflow(ctx, workflowID, "")
		if err != nil {
			return err
		}
		info := desc.RawResponse.GetWorkflowExecutionInfo()
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			skipped = "its workflow had closed (" + info.GetStatus().String() + "); nothing to reset"
			return nil
		}
		runID = info.GetExecution().GetRunId()
		first, err := r.firstWorkflowTask(ctx, workflowID, runID)
		if err != nil {
			return err
		}
		if first == 0 {
			skipped = "its workflow has not completed a workflow task yet; nothing to reset to"
			return nil
		}
		_, err = r.tc.WorkflowService().ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
			Namespace:                 r.namespace,
			WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID},
			Reason:                    "chaos: an operator reset the job to its first workflow task",
			WorkflowTaskFinishEventId: first,
			RequestId:                 requestID,
		})
		return err
	})
	switch {
	case err != nil:
		r.anomaly("resetting %s: %v", p.job.ID, err)
	case skipped != "":
		r.event("skipped", "%s (%s): %s", p.job.ID, p.job.InputRef, skipped)
	default:
		r.event(KindReset, "%s (%s) reset to its first workflow task (run %s)", p.job.ID, p.job.InputRef, runID)
	}
}

// firstWorkflowTask is the event ID of the run's first WorkflowTaskCompleted, the point
// `--type FirstWorkflowTask` resets to; 0 when the run has not completed one.
func (r *run) firstWorkflowTask(ctx context.Context, workflowID, runID string) (int64, error) {
	iter := r.tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		event, err := iter.Next()
		if err != nil {
			return 0, err
		}
		if event.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return event.GetEventId(), nil
		}
	}
	return 0, nil
}

// newRequestID is a random version-4 UUID, the form Temporal's request IDs take.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
