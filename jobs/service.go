// Package jobs is what product code imports to bill GPU jobs: submit a job under a
// client-generated ID, read its status and the state of the user's money, report a result that
// landed, delete a settled job, and re-drive a dead letter. It writes the ledger's placeholder
// first and then starts the job's workflow, so a job the ledger has never heard of is never run,
// and a job ID the ledger remembers is never charged twice.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// Options configures a [Service].
type Options struct {
	// Temporal is the client the job service starts and signals workflows with; the caller owns it.
	Temporal client.Client
	// Ledger is the ledger the job service writes placeholders to and reads jobs from.
	Ledger *ledgerdb.Store
	// TaskQueue is where the workflows run; workflows.TaskQueue when empty.
	TaskQueue string
	// Namespace is the Temporal namespace the client is connected to, for UI links and visibility
	// queries; workflows.DefaultNamespace when empty.
	Namespace string
	// UIURL is the Temporal Web UI's base URL, for links; no links when empty.
	UIURL string
	// Policy is each job's retry policy and late-result window; zero fields take the workflow's defaults.
	Policy workflows.Policy
	// Metrics counts results that reach the late-result fallback (a *metrics.Metrics); nil counts nothing.
	Metrics ResultRecorder
}

// ResultRecorder records what the late-result fallback did with a result.
type ResultRecorder interface {
	// ResultAfterClose records that a result reached the fallback and what the reclaim answered.
	ResultAfterClose(outcome ledgerdb.Outcome)
}

// Service submits and follows metered jobs. It is safe for concurrent use.
type Service struct {
	opts Options
}

// New returns a Service.
func New(opts Options) *Service {
	if opts.TaskQueue == "" {
		opts.TaskQueue = workflows.TaskQueue
	}
	if opts.Namespace == "" {
		opts.Namespace = workflows.DefaultNamespace
	}
	return &Service{opts: opts}
}

// Job is a client's request to run a paid job.
type Job struct {
	// ID is the client-generated job ID. The same ID in the same account is the same job,
	// forever: a retry of a submission must reuse it. IDs belong to their account: another
	// account's job of the same ID is another job.
	ID string
	// AccountID is the paying account.
	AccountID string
	// Kind names what the job is ("render-4k"); the ledger's price list says what it costs. A
	// caller names a kind, never an amount (the price-list rule).
	Kind string
	// MaxUnits, for a metered kind, is the most units the caller lets the job use, below the
	// kind's own maximum; 0 for the kind's. The job's charge holds this many units.
	MaxUnits int64
	// InputRef points at the job's input. For the simulated runner it may name a scenario ("sim:late:3").
	InputRef string
}

// Key names the job: its account and its ID.
func (j Job) Key() ledgerdb.JobKey { return ledgerdb.JobKey{AccountID: j.AccountID, JobID: j.ID} }

// submission is the ledger's submission of the job.
func (j Job) submission() ledgerdb.Submission {
	return ledgerdb.Submission{JobID: j.ID, AccountID: j.AccountID, Kind: j.Kind, MaxUnits: j.MaxUnits, Request: []byte(j.InputRef)}
}

// Submission is the answer of [Service.Submit].
type Submission struct {
	// Status is the job as it stands once its charge is decided.
	Status Status `json:"status"`
	// Duplicate is true when the ID had been submitted before with the same request: the
	// answer is the original job, and nothing new was charged.
	Duplicate bool `json:"duplicate"`
}

// Submit bills a job: it writes the ledger's placeholder at the kind's current price, starts the
// job's workflow and waits, in one round trip (Update-With-Start), until the charge (the hold) is
// decided. A kind with no price is [ledgerdb.ErrUnknownKind], with nothing written. A job that cannot be paid
// for is answered with its status rejected and [ledgerdb.ErrInsufficientCredits]; a job rejected
// for another reason with [ledgerdb.ErrRejected]. Either way nothing was charged and the ID can
// never be charged: a new attempt needs a new ID. A workflow that closes before its charge
// commits (an operator's Terminate) rejects the job, or, when the charge in flight commits first,
// is healed before Submit answers: the job is then refunded. A job whose run is open but whose
// decision Submit could not wait for answers submitting, its charge still to be decided.
// Submitting the same ID and request again answers the original job without charging it again; a
// different request under the ID is [ledgerdb.ErrConflict]; a deleted ID is [ledgerdb.ErrGone].
// An input reference the ledger's text rule refuses ([ledgerdb.ValidateInputRef]) is an
// [*ledgerdb.InvalidInputError], nothing written.
func (s *Service) Submit(ctx context.Context, job Job) (Submission, error) {
	if err := ledgerdb.ValidateInputRef(job.InputRef); err != nil {
		return Submission{}, err
	}
	placeholder, err := s.opts.Ledger.Submit(ctx, job.submission())
	if err != nil {
		return Submission{}, err
	}
	sub := Submission{Duplicate: placeholder.Outcome == ledgerdb.AlreadyApplied}
	if placeholder.Job.State != ledgerdb.StateSubmitting {
		// Decided long ago; the workflow may even have closed. The ledger has the answer.
		sub.Status, err = s.current(ctx, placeholder.Job)
		if err != nil {
			return Submission{}, err
		}
		return sub, chargeError(placeholder.Job)
	}
	current, err := s.startOrReject(ctx, job, placeholder.Job)
	if err != nil {
		return Submission{}, err
	}
	if sub.Status, err = s.status(ctx, current); err != nil {
		return Submission{}, err
	}
	return sub, chargeError(current)
}

// startOrReject starts the workflow of a placeholder and waits for its charge decision, and
// answers the job as the ledger then has it. A placeholder that no workflow can ever charge — its
// workflow closed before charging it, or its workflow ID is held by another program's workflow —
// is rejected, nothing charged, so that its user learns at once where their money stands.
//
// A workflow that closes under the submission (an operator's Terminate while the charge waits for
// a busy ledger) is such a workflow, whatever Temporal's error says of the aborted update. Its
// charge may still be in flight, so the rejection goes through the ledger's guard, which waits for
// it: when the charge commits first, the job stands charged with no workflow to settle it, and is
// healed at once. Either way the answer is where the money ends, never "not charged" of a job that
// a charge in flight is about to charge.
func (s *Service) startOrReject(ctx context.Context, job Job, placeholder ledgerdb.Job) (ledgerdb.Job, error) {
	err := s.startAndAwaitCharge(ctx, job, placeholder)
	if err != nil && ctx.Err() == nil && !errors.Is(err, errWorkflowEnded) && !errors.Is(err, ErrWorkflowIDTaken) {
		err = s.whyUndecided(ctx, job, err)
	}
	var reject ledgerdb.RejectReason
	switch {
	case errors.Is(err, errWorkflowEnded):
		reject = ledgerdb.RejectWorkflowEnded
	case errors.Is(err, ErrWorkflowIDTaken):
		reject = ledgerdb.RejectWorkflowIDTaken
	case errors.Is(err, errDeciding):
		// The run decides the charge; the ledger says how far it got (still submitting: received,
		// the charge being decided).
	case err != nil:
		return ledgerdb.Job{}, fmt.Errorf("job %q: starting its workflow: %w", job.ID, err)
	}
	if reject != "" {
		// The guard in ledger_reject_orphan rejects the job only if it is still uncharged, after
		// the charge in flight, which holds the job's row, has committed or rolled back.
		orphan, err := s.opts.Ledger.RejectOrphan(ctx, job.Key(), reject)
		if err != nil {
			return ledgerdb.Job{}, err
		}
		if orphan.Job.State == ledgerdb.StateRunning {
			if err := s.healNow(ctx, orphan.Job); err != nil {
				return ledgerdb.Job{}, err
			}
		}
	}
	// Whatever the workflow answered, the ledger is the record; read the job as it now stands.
	return s.opts.Ledger.Job(ctx, job.Key())
}

// whyUndecided reads, after the start or the charge-decision update failed with err, what holds
// the job's workflow ID: a closed run of the job (Temporal aborts the update of a run that closes
// under it), another program's workflow, or the job's open run, which still decides the charge
// (errDeciding). When Temporal cannot tell — it is unreachable, or no run was ever started — err
// stands: the job is received, and its charge undecided.
func (s *Service) whyUndecided(ctx context.Context, job Job, err error) error {
	desc, descErr := s.opts.Temporal.DescribeWorkflow(ctx, workflows.JobWorkflowID(job.AccountID, job.ID), "")
	if descErr != nil {
		return err
	}
	if held := holding(desc.RawResponse.GetWorkflowExecutionInfo()); held != nil {
		return fmt.Errorf("%w (after: %v)", held, err)
	}
	return fmt.Errorf("%w (after: %v)", errDeciding, err)
}

// holding says what the description of a job's workflow ID shows: another program's workflow
// (ErrWorkflowIDTaken), a run of the job that has closed (errWorkflowEnded), or the job's open run
// (nil).
func holding(info *workflowpb.WorkflowExecutionInfo) error {
	switch onWorkflowIDHeld(info.GetType().GetName(), info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING) {
	case workflowIDTaken:
		return fmt.Errorf("%w (a %q workflow)", ErrWorkflowIDTaken, info.GetType().GetName())
	case answerFromRecord:
		return errWorkflowEnded
	}
	return nil
}

// healNow heals a job that a charge in flight charged after its workflow had closed, and waits
// until it is refunded, so that the submission answers where its money ends. The charge step may
// have started the heal run itself a moment before ([activities.Activities.Charge] heals what it
// charges for a closed run): then this waits for that run's decision.
func (s *Service) healNow(ctx context.Context, job ledgerdb.Job) error {
	healed, err := s.Heal(ctx, job)
	if err != nil || healed {
		return err
	}
	current, err := s.opts.Ledger.Job(ctx, job.Key())
	if err != nil || current.State != ledgerdb.StateRunning {
		return err
	}
	// Still running, and a run is open under the ID (Heal leaves a job to its open run): wait for
	// that run's decision. A run that closed meanwhile has settled, or is healed by the next read.
	handle, err := s.attach(ctx, workflows.JobWorkflowID(job.AccountID, job.ID), "heal-wait:"+job.ID)
	if errors.Is(err, errWorkflowEnded) || errors.Is(err, ErrWorkflowIDTaken) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("job %q: waiting for its heal run: %w", job.ID, err)
	}
	var decision workflows.ChargeDecision
	if err := handle.Get(ctx, &decision); err != nil {
		return fmt.Errorf("job %q: waiting for its heal run: %w", job.ID, err)
	}
	return nil
}

// What holds the job's workflow ID when the charge decision did not come (the errors of
// startAndAwaitCharge and whyUndecided): the first two say that no workflow will ever charge the
// placeholder.
var (
	// errWorkflowEnded: the job's workflow closed before charging it; its ID cannot start again.
	errWorkflowEnded = errors.New("the job's workflow ended before charging it")
	// errDeciding: the submission could not wait for the charge decision, but the job's run is
	// open and decides it.
	errDeciding = errors.New("the job's workflow runs and decides the charge")
)

// ErrWorkflowIDTaken means the job's workflow ID is held by an open workflow that is not the job's
// MeteredJob (another program's, in a namespace it shares): no run of the job's own workflow can
// start under the ID, and nothing is sent to the foreign run. A submission is rejected for it
// (nothing charged), a redrive refused; a heal and a reported result go around it (the ledger's
// guarded refund, the late-result fallback).
var ErrWorkflowIDTaken = errors.New("the job's workflow ID is held by another program's workflow")

// startAndAwaitCharge starts the job's workflow and waits for the charge decision. The ID
// policies make a second charge impossible on the Temporal side too: a closed run is never
// started again (REJECT_DUPLICATE), and a running one is never duplicated — the ledger's guard
// stands behind both.
//
// The start fails rather than joins when a workflow already runs under the ID (conflict policy
// FAIL): Update-With-Start would send the charge-decision update into whatever runs there, and in
// a namespace that other programs share, that may be another program's workflow that never
// answers. Only when the workflow under the ID is this job's MeteredJob is the update sent to it.
func (s *Service) startAndAwaitCharge(ctx context.Context, job Job, placeholder ledgerdb.Job) error {
	in := workflows.JobInput{
		JobID:     job.ID,
		AccountID: job.AccountID,
		Kind:      job.Kind,
		MaxUnits:  job.MaxUnits,
		Work:      activities.WorkRequest{InputRef: job.InputRef},
		Policy:    s.opts.Policy,
	}
	workflowID := workflows.JobWorkflowID(job.AccountID, job.ID)
	start := s.opts.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       workflowID,
		TaskQueue:                s.opts.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:            in.StaticSummary(placeholder.Cost),
		TypedSearchAttributes:    jobSearchAttributes(job.AccountID, ledgerdb.StateSubmitting),
	}, workflows.MeteredJob, in)
	return s.unlessClosed(ctx, workflowID, func(ctx context.Context) error {
		handle, err := s.opts.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions:          chargeDecisionUpdate(workflowID, job.ID),
		})
		if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			handle, err = s.attach(ctx, workflowID, job.ID)
		}
		if err != nil {
			return err
		}
		var decision workflows.ChargeDecision
		return handle.Get(ctx, &decision)
	})
}

// unlessClosed runs await — a wait for the charge decision — until it answers, or until the job's
// run under workflowID closes: then it answers errWorkflowEnded. Temporal aborts the update of a
// run that closes under it, but not always in a way its caller hears of (the update's wait may go
// on until its deadline), so the close itself is watched: the submission learns at once that no
// run will decide the charge, rather than answer "undecided" of a charge in flight.
func (s *Service) unlessClosed(ctx context.Context, workflowID string, await func(context.Context) error) error {
	awaitCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		if s.awaitClose(awaitCtx, workflowID) {
			cancel(errWorkflowEnded)
		}
	}()
	err := await(awaitCtx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(awaitCtx), errWorkflowEnded) {
		return errWorkflowEnded
	}
	return err
}

// awaitClose waits until the job's MeteredJob run under workflowID has closed, and says whether it
// did; it answers false when ctx ends first, or when another program's workflow holds the ID
// (the start or the attach says so). It first waits closeWatchDelay, within which charge
// decisions come and the watch ends before it began; then it finds the run (looking again every
// poll interval while it has not started yet) and long-polls its close event, which Temporal
// answers when it closes.
func (s *Service) awaitClose(ctx context.Context, workflowID string) bool {
	wait := closeWatchDelay
	for {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = pollEvery
		desc, err := s.opts.Temporal.DescribeWorkflow(ctx, workflowID, "")
		if err != nil {
			continue
		}
		switch held := holding(desc.RawResponse.GetWorkflowExecutionInfo()); {
		case errors.Is(held, ErrWorkflowIDTaken):
			return false
		case held != nil:
			return true
		}
		iter := s.opts.Temporal.GetWorkflowHistory(ctx, workflowID, desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId(), true,
			enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		if iter.HasNext() {
			if _, err := iter.Next(); err == nil {
				return true
			}
		}
	}
}

// closeWatchDelay is how long a submission waits for its charge decision before it also watches
// the run's close (awaitClose). A watch costs the server a describe and a long poll of the run's
// history, on top of the submission's own round trip; begun after the 200 ms of a poll interval,
// it ran for nearly every submission of a busy server, whose decisions take longer than that,
// which is when the server can least spare the calls. The run that closes under its submission (an
// operator's Terminate while the charge waits for a busy ledger) is rare, and its submission is
// answered at most this much later.
const closeWatchDelay = 2 * time.Second

// heldIDAction is what a submission does when its start is refused because a workflow already
// holds the job's workflow ID.
type heldIDAction string

// The actions of [onWorkflowIDHeld].
const (
	// joinRun: the job's own workflow runs; send the charge-decision update to it.
	joinRun heldIDAction = "join"
	// answerFromRecord: the job's own workflow has closed; answer the job as it stands and never
	// start it again (a closed run's ID starting again is how a closed job could run twice).
	answerFromRecord heldIDAction = "answer_from_record"
	// workflowIDTaken: another program's workflow holds the ID, running or closed; the job can
	// never start under it.
	workflowIDTaken heldIDAction = "workflow_id_taken"
)

// onWorkflowIDHeld is the rule for a job's workflow ID held by a workflow of workflowType that is
// running or not. It is shared, row for row, with the TypeScript Temporal helper: both are tested
// against the workflow_id_held table of apiclient/testdata/submission-decisions.json.
func onWorkflowIDHeld(workflowType string, running bool) heldIDAction {
	switch {
	case workflowType != workflows.WorkflowType:
		return workflowIDTaken
	case running:
		return joinRun
	}
	return answerFromRecord
}

// attach sends the charge-decision update to the workflow already under the job's workflow ID,
// after checking that it is this job's MeteredJob and that it runs ([onWorkflowIDHeld]).
func (s *Service) attach(ctx context.Context, workflowID, jobID string) (client.WorkflowUpdateHandle, error) {
	desc, err := s.opts.Temporal.DescribeWorkflow(ctx, workflowID, "")
	if err != nil {
		return nil, fmt.Errorf("describing the workflow under the job's ID: %w", err)
	}
	if held := holding(desc.RawResponse.GetWorkflowExecutionInfo()); held != nil {
		return nil, held
	}
	handle, err := s.opts.Temporal.UpdateWorkflow(ctx, chargeDecisionUpdate(workflowID, jobID))
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		// It closed between the two calls: the ledger has the answer.
		return nil, errWorkflowEnded
	}
	return handle, err
}

// chargeDecisionUpdate is the charge-decision update sent to the workflow of workflowID. Its ID
// comes from key (the job ID for a submission): a retried submission is the same update, answered
// once.
func chargeDecisionUpdate(workflowID, key string) client.UpdateWorkflowOptions {
	return client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateID:     "charge-decision:" + key,
		UpdateName:   workflows.UpdateChargeDecision,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	}
}

// jobSearchAttributes are the search attributes a job's run starts with, so that the UI can
// filter it from its first moment (the workflow upserts them at each transition after that).
func jobSearchAttributes(accountID string, state ledgerdb.State) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		workflows.BillingStateKey.ValueSet(string(state)),
		workflows.AccountIDKey.ValueSet(accountID),
		workflows.DeadLetteredKey.ValueSet(false),
	)
}

// Resume finishes a submission that wrote its placeholder but never started its workflow (the
// submitter crashed, or Temporal was unreachable, between the two steps): it reads the job and
// its kept request from the ledger and makes the very start that Submit makes, so the job runs as
// if its submission had gone through. A job no longer submitting is answered as it stands. If two
// reconcilers race, the ledger's charge guard (NOT is_charged) lets one charge through at most.
//
// A placeholder whose workflow closed before charging it (terminated, failed or timed out) cannot
// be started again: the reuse policy refuses a closed ID, which is what keeps a closed job from
// ever being charged twice, and restarting it would run work an operator may have stopped on
// purpose. Resume rejects such a job instead (nothing charged), and one whose workflow ID is held
// by another program's workflow, so that its user is told where their money stands.
func (s *Service) Resume(ctx context.Context, key ledgerdb.JobKey) (Status, error) {
	job, err := s.opts.Ledger.Job(ctx, key)
	if err != nil {
		return Status{}, err
	}
	if job.State != ledgerdb.StateSubmitting {
		return s.status(ctx, job)
	}
	request, err := s.opts.Ledger.JobRequest(ctx, key)
	if err != nil {
		return Status{}, err
	}
	if len(request) == 0 {
		// Running the work on no input would charge for work that never saw the job's input.
		return s.statusBeside(ctx, job, fmt.Errorf("job %s: its input is not known to the ledger; it cannot be resumed", key))
	}
	resumed := Job{ID: job.ID, AccountID: job.AccountID, Kind: job.Kind, InputRef: string(request)}
	if job.HeldUnits > 0 {
		resumed.MaxUnits = job.HeldUnits
	}
	current, err := s.startOrReject(ctx, resumed, job)
	if err != nil {
		return Status{}, err
	}
	return s.status(ctx, current)
}

// chargeError is the error a submission answers for a job whose charge was refused: nothing was
// charged, and the ID can never be charged.
func chargeError(job ledgerdb.Job) error {
	if job.State == ledgerdb.StateRejected {
		return &ledgerdb.RejectedError{Job: job.Key(), Reason: job.RejectReason}
	}
	return nil
}

// Delete turns a settled job into a tombstone: its ID can never be submitted or charged again,
// and deleting moves no money. It removes the job's content (its output) from view, never an
// obligation: a refunded job's late result still takes the refund back and settles the job at its
// usage ([Service.ReportResult]). A job still submitting or running is refused with
// [ledgerdb.ErrJobActive].
func (s *Service) Delete(ctx context.Context, key ledgerdb.JobKey) (Status, error) {
	t, err := s.opts.Ledger.Delete(ctx, key)
	if err != nil {
		return Status{}, err
	}
	return s.status(ctx, t.Job)
}

// ErrNotDeadLettered means a redrive was asked for a job that is not refunded.
var ErrNotDeadLettered = errors.New("only a refunded (dead-lettered) job can be re-driven")

// Redrive runs a dead-lettered job's work again under the same guards: if it succeeds, the
// refund is reclaimed and the job is recovered. by names who asked, for the timeline.
func (s *Service) Redrive(ctx context.Context, key ledgerdb.JobKey, by, note string) (Status, error) {
	// The ledger's text rule, at the door: the workflow's own check of a redrive signal stays as
	// lenient as the histories it has already accepted.
	if err := ledgerdb.ValidateText("by", by, workflows.MaxRedriveByLength); err != nil {
		return Status{}, err
	}
	if err := ledgerdb.ValidateText("note", note, ledgerdb.MaxTextLength); err != nil {
		return Status{}, err
	}
	req := workflows.RedriveRequest{By: by, Note: note}
	if err := req.Validate(); err != nil {
		return Status{}, &ledgerdb.InvalidInputError{Field: "redrive request", Reason: err.Error()}
	}
	job, err := s.opts.Ledger.Job(ctx, key)
	if err != nil {
		return Status{}, err
	}
	if job.State != ledgerdb.StateRefunded {
		return s.statusBeside(ctx, job, fmt.Errorf("job %s is %s: %w", key, job.State, ErrNotDeadLettered))
	}
	workflowID := workflows.JobWorkflowID(job.AccountID, job.ID)
	run, err := s.describeRun(ctx, workflowID)
	if err != nil {
		return Status{}, fmt.Errorf("job %s: redrive: %w", key, err)
	}
	if run.foreign() && run.open() {
		// The redrive runs the work in a run of the job's own workflow, which cannot start while
		// another program's run holds the ID; signalled, that run would swallow the redrive.
		return s.statusBeside(ctx, job, fmt.Errorf("job %s: redrive: %w (a %q workflow, run %s)", key, ErrWorkflowIDTaken, run.typ, run.runID))
	}
	err = s.opts.Temporal.SignalWorkflow(ctx, workflowID, run.signalRunID(), workflows.SignalRedrive, req)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		// The late-result window ended and the workflow closed. A new run of the same ID finds
		// the job refunded in the ledger (its charge step answers "already charged") and goes
		// straight to listening, where this redrive waits for it. The ledger's guard still
		// refuses a second charge.
		in, inErr := s.inputOf(ctx, job)
		if inErr != nil {
			return Status{}, inErr
		}
		if in.Work.InputRef == "" {
			// A job from before the ledger kept requests: running it on no input would charge
			// again (on success) for work that never saw the job's input.
			return s.statusBeside(ctx, job, fmt.Errorf("job %s: its input is not known to the ledger and its workflow is gone; it cannot be re-driven", key))
		}
		_, err = s.opts.Temporal.SignalWithStartWorkflow(ctx, workflowID, workflows.SignalRedrive, req, client.StartWorkflowOptions{
			ID:                       workflowID,
			TaskQueue:                s.opts.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:            in.StaticSummary(job.Cost) + " (redrive)",
			TypedSearchAttributes:    jobSearchAttributes(job.AccountID, ledgerdb.StateRefunded),
		}, workflows.MeteredJob, in)
	}
	if err != nil {
		return Status{}, fmt.Errorf("job %s: redrive: %w", key, err)
	}
	return s.status(ctx, job)
}

// inputOf is the input a new run of a job's workflow starts with: the job as the ledger has it
// (its kind, and the units it holds when it was submitted with a smaller maximum), the request it
// was submitted with (the ledger keeps it for as long as it keeps the job; a closed workflow's
// history may be gone) and this service's policy. It carries no amount: the run charges — or
// finds charged — the ledger's own record.
func (s *Service) inputOf(ctx context.Context, job ledgerdb.Job) (workflows.JobInput, error) {
	request, err := s.opts.Ledger.JobRequest(ctx, job.Key())
	if err != nil {
		return workflows.JobInput{}, err
	}
	in := workflows.JobInput{
		JobID: job.ID, AccountID: job.AccountID, Kind: job.Kind, Policy: s.opts.Policy,
		Work: activities.WorkRequest{InputRef: string(request)},
	}
	if job.Kind != "" {
		in.MaxUnits = job.HeldUnits
	}
	return in, nil
}

// WorkflowURL is the job's page in the Temporal Web UI; empty without a UI URL.
func (s *Service) WorkflowURL(workflowID string) string {
	if s.opts.UIURL == "" {
		return ""
	}
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", s.opts.UIURL, url.PathEscape(s.opts.Namespace), url.PathEscape(workflowID))
}

// pollEvery is how often Wait reads the ledger.
const pollEvery = 200 * time.Millisecond

// Wait polls the ledger until the job reaches one of the states, or ctx ends.
func (s *Service) Wait(ctx context.Context, key ledgerdb.JobKey, states ...ledgerdb.State) (Status, error) {
	ticker := time.NewTicker(pollEvery)
	defer ticker.Stop()
	for {
		st, err := s.Status(ctx, key)
		if err != nil {
			return st, err
		}
		for _, want := range states {
			if st.State == want {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("job %s still %s: %w", key, st.State, ctx.Err())
		case <-ticker.C:
		}
	}
}
