package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/plural"
	"github.com/jobbill/jobbill/workflows"
)

// Status is a job as its user should see it: where it stands, where their money stands, and a
// sentence that says both.
type Status struct {
	// JobID and AccountID identify the job.
	JobID     string `json:"job_id"`
	AccountID string `json:"account_id"`
	// Kind is what the job is; empty for a job submitted with a cost before the price list.
	Kind string `json:"kind,omitempty"`
	// PriceVersion is the version of the kind's price the job was submitted at.
	PriceVersion int `json:"price_version,omitempty"`
	// Unit, UnitPrice and HeldUnits are that price's unit and credits per unit, and the units
	// the job's charge holds.
	Unit      ledgerdb.Unit `json:"unit,omitempty"`
	UnitPrice int64         `json:"unit_price,omitempty"`
	HeldUnits int64         `json:"held_units,omitempty"`
	// Held is what the job's charge holds, in credits: UnitPrice × HeldUnits.
	Held int64 `json:"held"`
	// UnitsUsed is the usage the job was settled at (capped at HeldUnits); absent until then.
	UnitsUsed *int64 `json:"units_used,omitempty"`
	// OutputRef is the output the job's result was settled with (delivered or recovered); absent
	// until then, for jobs settled before the ledger kept it, and once the job is deleted
	// (deletion removes its content from view).
	OutputRef string `json:"output_ref,omitempty"`
	// Charged is what the job costs the account as it stands: the whole hold while charged and
	// unsettled, UnitsUsed × UnitPrice once settled, 0 when not charged or refunded.
	Charged int64 `json:"charged"`
	// Released is the part of the hold the settlement gave back.
	Released int64 `json:"released"`
	// State is the job's state (ledgerdb.State values).
	State ledgerdb.State `json:"state"`
	// MoneyState is where the user's money stands: not_charged, charged or refunded.
	MoneyState ledgerdb.MoneyState `json:"money_state"`
	// Attempts is how many attempts the work has had, as last recorded.
	Attempts int `json:"attempts"`
	// Reason says why the job was refunded or rejected, as a code of the fixed vocabulary
	// (ledgerdb.Reason; docs/api.md lists them); empty when it was neither.
	Reason ledgerdb.Reason `json:"reason,omitempty"`
	// Message is a sentence for the user about the job and their money. It is made of fixed
	// words only: the reason's text, the job's figures.
	Message string `json:"message"`
	// Detail is for operators only: the refund's words (what the GPU service, the workflow or an
	// operator said, scrubbed of credentials) or the rejection's. They may name internal hosts, so
	// the API shows them to admin keys only; the CLI, an operator's tool, shows them.
	Detail string `json:"detail,omitempty"`
	// CreatedAt is when the job was submitted (its placeholder written): the order of a list of
	// jobs, newest first.
	CreatedAt time.Time `json:"created_at"`
	// WorkflowURL is the job's page in the Temporal Web UI, when the job service knows the UI.
	WorkflowURL string `json:"workflow_url,omitempty"`
}

// Key names the job: its account and its ID.
func (st Status) Key() ledgerdb.JobKey {
	return ledgerdb.JobKey{AccountID: st.AccountID, JobID: st.JobID}
}

// status is the job as its user should see it, its sentence told with the expiries its refund or
// release caused: read only for a job that has had credits returned.
func (s *Service) status(ctx context.Context, job ledgerdb.Job) (Status, error) {
	if !returnedCredits(job) {
		return s.statusOf(job, nil), nil
	}
	expired, err := s.opts.Ledger.ExpiredReturns(ctx, []ledgerdb.JobKey{job.Key()})
	if err != nil {
		return Status{}, err
	}
	return s.statusOf(job, expired[job.Key()]), nil
}

// statusBeside is the job's status given beside err, which says why a call did nothing; a failure
// to read the job's expiries is joined to it.
func (s *Service) statusBeside(ctx context.Context, job ledgerdb.Job, err error) (Status, error) {
	st, readErr := s.status(ctx, job)
	if readErr != nil {
		st = s.statusOf(job, nil)
	}
	return st, errors.Join(err, readErr)
}

// returnedCredits says whether a refund or a release may have returned credits of the job: only
// such a job can have had some of them expire at once.
func returnedCredits(job ledgerdb.Job) bool {
	switch job.State {
	case ledgerdb.StateRefunded, ledgerdb.StateRecovered, ledgerdb.StateDeleted:
		return true
	}
	return job.Released() > 0
}

// statusOf is the job as its user should see it, with the expiries its refund or release caused
// ([ledgerdb.Store.ExpiredReturns]).
func (s *Service) statusOf(job ledgerdb.Job, expired []ledgerdb.Entry) Status {
	st := Status{
		JobID:        job.ID,
		AccountID:    job.AccountID,
		Kind:         job.Kind,
		PriceVersion: job.PriceVersion,
		Unit:         job.Unit,
		UnitPrice:    job.UnitPrice,
		HeldUnits:    job.HeldUnits,
		Held:         job.Cost,
		UnitsUsed:    job.UnitsUsed,
		Charged:      job.Charged(),
		Released:     job.Released(),
		State:        job.State,
		MoneyState:   job.MoneyState(),
		Attempts:     job.Attempts,
		CreatedAt:    job.CreatedAt,
		WorkflowURL:  s.WorkflowURL(workflows.JobWorkflowID(job.AccountID, job.ID)),
	}
	if job.State != ledgerdb.StateDeleted {
		st.OutputRef = job.OutputRef
	}
	switch {
	case job.RefundReason != "" && (job.State == ledgerdb.StateRefunded || job.StateBeforeDelete == ledgerdb.StateRefunded):
		// Scrubbed again: a job refunded before the ledger scrubbed its words may hold a password.
		st.Reason, st.Detail = job.RefundReason, ledgerdb.ScrubText(job.RefundDetail)
	case job.RejectReason != "":
		st.Reason, st.Detail = job.RejectReason.Reason(), job.RejectReason.Describe()
	}
	st.Message = Message(job, expired)
	return st
}

// Message is the sentence a user reads about a job and their money (always say where the money
// is), with what of the credits its refund or release returned had expired and were removed at
// once (expired: the expiries they caused, [ledgerdb.Store.ExpiredReturns]).
func Message(job ledgerdb.Job, expired []ledgerdb.Entry) string {
	msg := message(job)
	switch {
	case removed(expired) == 0:
		return msg
	case job.State == ledgerdb.StateRefunded:
		// "… Your 40 credits were refunded; 15 of them had expired on 31 Dec 2026 and were removed."
		return strings.TrimSuffix(msg, ".") + "; " + ExpiredText(expired) + "."
	}
	return msg + " " + returnedExpiredText(expired)
}

// message is the sentence of a job whose returned credits all stayed the user's.
func message(job ledgerdb.Job) string {
	switch job.State {
	case ledgerdb.StateSubmitting:
		// Never "not charged": the charge may still commit (money state pending).
		return SubmittingMessage
	case ledgerdb.StateRejected:
		return RejectedMessage(job.RejectReason)
	case ledgerdb.StateRunning:
		if job.Unit == ledgerdb.UnitGPUSecond {
			return fmt.Sprintf("Running. %s %s held (%s at %s each); you are charged only for the seconds used, and "+
				"everything is refunded if the job fails for good.", plural.Count(job.Cost, "credit"), plural.Of(job.Cost, "is", "are"),
				plural.Count(job.HeldUnits, "GPU-second"), plural.Count(job.UnitPrice, "credit"))
		}
		return fmt.Sprintf("Running. %s %s charged; %s refunded if the job fails for good.", plural.Count(job.Cost, "credit"),
			plural.Of(job.Cost, "was", "were"), plural.Of(job.Cost, "it is", "they are"))
	case ledgerdb.StateDelivered:
		return "Done. " + chargedText(job)
	case ledgerdb.StateRefunded:
		return fmt.Sprintf("Not delivered: %s. Your %s %s refunded.", job.RefundReason.Text(), plural.Count(job.Cost, "credit"),
			plural.Of(job.Cost, "was", "were"))
	case ledgerdb.StateRecovered:
		if job.IsSettled {
			return "Done: the result arrived after the job had been refunded, so the refund was taken back and the job " +
				"settled at its usage. " + chargedText(job)
		}
		// The money moved back: the refund was reclaimed, nothing was charged a second time.
		return fmt.Sprintf("Done: the result arrived after the job had been refunded, so the refund of %s was taken back.",
			plural.Count(job.Cost, "credit"))
	case ledgerdb.StateDeleted:
		return deletedMessage(job)
	}
	return "Unknown state; keep polling this ID. Do not submit a new job."
}

// deletedMessage says where a tombstone's money stands. Deleting moves no money and cancels no
// obligation: a refunded job's late result still takes the refund back (docs/design.md, "The job
// state machine"), so a refunded tombstone says so, and one recovered says what it now costs —
// true whether its result landed before or after the deletion.
func deletedMessage(job ledgerdb.Job) string {
	const deleted = "Deleted; its ID can never be used again. "
	switch {
	case job.StateBeforeDelete == ledgerdb.StateRecovered && job.IsSettled && job.Unit == ledgerdb.UnitGPUSecond:
		return deleted + "Its result arrived after it had been refunded, so the refund was taken back: " + chargedText(job)
	case job.StateBeforeDelete == ledgerdb.StateRecovered:
		return deleted + fmt.Sprintf("Its result arrived after it had been refunded, so the refund of %s was taken back.",
			plural.Count(job.Charged(), "credit"))
	case job.MoneyState() == ledgerdb.MoneyRefunded:
		return deleted + fmt.Sprintf("Your %s %s refunded; if the job's result still arrives, the refund is taken back "+
			"and the job settled at its usage.", plural.Count(job.Cost, "credit"), plural.Of(job.Cost, "was", "were"))
	case job.MoneyState() == ledgerdb.MoneyCharged:
		return deleted + fmt.Sprintf("Your money stays as it was: %s charged.", plural.Count(job.Charged(), "credit"))
	}
	return deleted + "Your money stays as it was: you were not charged."
}

// chargedText says what a delivered or recovered job was charged: its whole cost, or, once
// settled, what of its hold was charged and what returned ("137 of 300 held credits charged; 163
// returned.", with the usage).
func chargedText(job ledgerdb.Job) string {
	if !job.IsSettled || job.Unit != ledgerdb.UnitGPUSecond {
		return fmt.Sprintf("%s %s charged.", plural.Count(job.Charged(), "credit"), plural.Of(job.Charged(), "was", "were"))
	}
	return workflows.SettlementText(job.Charged(), job.Released(), job.Cost) +
		fmt.Sprintf(" (%s used at %s each)", plural.Count(*job.UnitsUsed, "GPU-second"), plural.Count(job.UnitPrice, "credit"))
}

// RejectedMessage is what a user reads about a job rejected for reason: why, in the words of its
// code ([ledgerdb.RejectReason.Reason]), that nothing was charged, and that the ID is burnt — the
// same ID answers this rejection for ever, so a new try needs a new ID.
func RejectedMessage(reason ledgerdb.RejectReason) string {
	return fmt.Sprintf("Not started: %s. You were not charged. This job ID can never be charged: "+
		"submit the job again under a new ID.", reason.Reason().Text())
}

// SubmittingMessage is what a user reads about a job whose charge is being decided: received, and
// neither charged nor rejected yet. It says nothing of the money that the charge may still change.
const SubmittingMessage = "Received; the charge is being decided. Keep polling this ID: it is charged once at most."

// NotReceivedMessage is what a user reads about a job ID the server never received (HTTP 404).
const NotReceivedMessage = "Not received by the server — you were not charged. Please retry."
