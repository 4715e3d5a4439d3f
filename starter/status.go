package starter

import (
	"fmt"

	"github.com/jobbill/jobbill/ledgerdb"
)

// Status is a job as its user should see it: where it stands, where their money stands, and a
// sentence that says both.
type Status struct {
	// JobID and AccountID identify the job.
	JobID     string `json:"job_id"`
	AccountID string `json:"account_id"`
	// Cost is the job's price in credits.
	Cost int64 `json:"cost"`
	// State is the job's state (ledgerdb.State values).
	State ledgerdb.State `json:"state"`
	// MoneyState is where the user's money stands: not_charged, charged or refunded.
	MoneyState ledgerdb.MoneyState `json:"money_state"`
	// Attempts is how many attempts the work has had, as last recorded.
	Attempts int `json:"attempts"`
	// Reason says why the job was rejected or refunded.
	Reason string `json:"reason,omitempty"`
	// Message is a sentence for the user about the job and their money.
	Message string `json:"message"`
	// WorkflowURL is the job's page in the Temporal Web UI, when the starter knows the UI.
	WorkflowURL string `json:"workflow_url,omitempty"`
}

func (s *Starter) statusOf(job ledgerdb.Job) Status {
	st := Status{
		JobID:       job.ID,
		AccountID:   job.AccountID,
		Cost:        job.Cost,
		State:       job.State,
		MoneyState:  job.MoneyState(),
		Attempts:    job.Attempts,
		WorkflowURL: s.WorkflowURL(job.ID),
	}
	switch {
	case job.RefundReason != "" && (job.State == ledgerdb.StateRefunded || job.StateBeforeDelete == ledgerdb.StateRefunded):
		st.Reason = job.RefundReason
	case job.RejectReason != "":
		st.Reason = job.RejectReason
	}
	st.Message = Message(job)
	return st
}

// Message is the sentence a user reads about a job and their money (seed 004: always say where
// the money is).
func Message(job ledgerdb.Job) string {
	switch job.State {
	case ledgerdb.StateSubmitting:
		return "Received; the charge is being decided. You have not been charged yet."
	case ledgerdb.StateRejected:
		return "Not started: your account does not have enough credits. You were not charged."
	case ledgerdb.StateRunning:
		return fmt.Sprintf("Running. %d credits were charged; they are refunded if the job fails for good.", job.Cost)
	case ledgerdb.StateDelivered:
		return fmt.Sprintf("Done. %d credits were charged.", job.Cost)
	case ledgerdb.StateRefunded:
		return fmt.Sprintf("The job failed (%s). Your %d credits were refunded.", job.RefundReason, job.Cost)
	case ledgerdb.StateRecovered:
		return fmt.Sprintf("Done: the result arrived after the job had been refunded, so the %d credits were charged again.", job.Cost)
	case ledgerdb.StateDeleted:
		return fmt.Sprintf("Deleted; its ID can never be used again. Your money stays as it was: %s.",
			map[ledgerdb.MoneyState]string{
				ledgerdb.MoneyNotCharged: "you were not charged",
				ledgerdb.MoneyCharged:    fmt.Sprintf("%d credits charged", job.Cost),
				ledgerdb.MoneyRefunded:   fmt.Sprintf("%d credits refunded", job.Cost),
			}[job.MoneyState()])
	}
	return "Unknown state; keep polling this ID. Do not submit a new job."
}

// NotReceivedMessage is what a user reads about a job ID the server never received (HTTP 404).
const NotReceivedMessage = "Not received by the server — you were not charged. Please retry."
