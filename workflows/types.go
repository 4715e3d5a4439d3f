package workflows

import (
	"fmt"
	"time"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
)

// JobInput starts a metered job. The workflow ID is the client's job ID, and the job's
// placeholder must already be in the ledger (the starter writes it first).
type JobInput struct {
	// JobID is the client's job ID, the same as the workflow ID.
	JobID string
	// AccountID is the paying account; it becomes the AccountID search attribute.
	AccountID string
	// Cost is the job's price in credits, for summaries and display only. The ledger moves the
	// cost on its own job record, never this number (money rule 5).
	Cost int64
	// Work says what to run; JobID and Attempt are filled in by the workflow and the activity.
	Work activities.WorkRequest
	// Policy is how the work is retried and how long a late result is awaited; zero fields take
	// the defaults of [DefaultPolicy].
	Policy Policy
}

// StaticSummary is the one-line summary the starter gives the workflow
// (client.StartWorkflowOptions.StaticSummary), shown in the UI's workflow list: the job, its
// price and the paying account. It stays under the UI's 200-byte limit for any valid IDs.
func (in JobInput) StaticSummary() string {
	return fmt.Sprintf("%s: %d credits from %s", in.JobID, in.Cost, in.AccountID)
}

// Policy is how the work activity is retried, and how long a refunded job waits for a late result.
type Policy struct {
	// InitialInterval is the wait before the first retry.
	InitialInterval time.Duration
	// BackoffCoefficient multiplies the wait after each retry (at least 1).
	BackoffCoefficient float64
	// MaximumInterval caps the wait between retries.
	MaximumInterval time.Duration
	// MaximumAttempts is how many attempts the work gets before the job is refunded and
	// dead-lettered; it is the dead-letter point.
	MaximumAttempts int32
	// StartToClose is the longest one attempt may run.
	StartToClose time.Duration
	// HeartbeatTimeout is how long an attempt may go without a heartbeat before Temporal takes it
	// for dead; it is also how fast a cancellation reaches it.
	HeartbeatTimeout time.Duration
	// LateResultWindow is how long a refunded job keeps listening for a late result (and for a
	// redrive) before the workflow closes.
	LateResultWindow time.Duration
}

// DefaultPolicy suits GPU jobs: renders and transcriptions that take minutes, on machines that
// are busy or preempted rather than broken, so retries back off to minutes, an attempt may run
// half an hour, and a result may land up to a day late.
func DefaultPolicy() Policy {
	return Policy{
		InitialInterval:    30 * time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    5 * time.Minute,
		MaximumAttempts:    3,
		StartToClose:       30 * time.Minute,
		HeartbeatTimeout:   time.Minute,
		LateResultWindow:   24 * time.Hour,
	}
}

// WithDefaults returns p with every zero field taken from [DefaultPolicy].
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	if p.InitialInterval <= 0 {
		p.InitialInterval = d.InitialInterval
	}
	if p.BackoffCoefficient < 1 {
		p.BackoffCoefficient = d.BackoffCoefficient
	}
	if p.MaximumInterval <= 0 {
		p.MaximumInterval = max(d.MaximumInterval, p.InitialInterval)
	}
	if p.MaximumInterval < p.InitialInterval {
		// The server refuses a retry policy whose maximum is below its initial interval.
		p.MaximumInterval = p.InitialInterval
	}
	if p.MaximumAttempts <= 0 {
		p.MaximumAttempts = d.MaximumAttempts
	}
	if p.StartToClose <= 0 {
		p.StartToClose = d.StartToClose
	}
	if p.HeartbeatTimeout <= 0 {
		p.HeartbeatTimeout = d.HeartbeatTimeout
	}
	if p.LateResultWindow <= 0 {
		p.LateResultWindow = d.LateResultWindow
	}
	return p
}

// ResultSignal is the payload of [SignalResult]: the job's result landed. It never carries an
// amount; the ledger reclaims the job's recorded cost (money rule 5).
type ResultSignal struct {
	// Attempt is the attempt that produced the result.
	Attempt int
	// OutputRef points at the job's output.
	OutputRef string
	// FinishedAt is when the work finished, by the runner's clock.
	FinishedAt time.Time
}

// RedriveRequest is the payload of [SignalRedrive].
type RedriveRequest struct {
	// By names who asked (an operator, a CLI user), for the timeline.
	By string
	// Note says why.
	Note string
}

// JobStatus is the answer of [QueryStatus] and the workflow's result.
type JobStatus struct {
	// JobID and AccountID identify the job.
	JobID, AccountID string
	// Cost is the job's price in credits, as given at start (display only).
	Cost int64
	// State is where the job stands; it is the BillingState search attribute.
	State ledgerdb.State
	// MoneyState is what the user is told about their money.
	MoneyState ledgerdb.MoneyState
	// Attempts is how many attempts the work had, as far as the workflow knows.
	Attempts int
	// DeadLettered is true while the job is refunded and not recovered; it is the DeadLettered
	// search attribute.
	DeadLettered bool
	// Reason says why the job was rejected or refunded.
	Reason string
	// OutputRef points at the job's output once it was delivered or recovered.
	OutputRef string
	// Redrives counts the redrives run.
	Redrives int
	// IgnoredResults counts result signals that changed nothing because the job had settled.
	IgnoredResults int
}

// ChargeDecision is the answer of [UpdateChargeDecision]: whether the job was charged.
type ChargeDecision struct {
	// State is the job's state right after its charge was decided: running when charged now,
	// rejected when refused, or a later state when an earlier run of this ID already billed it.
	State ledgerdb.State
	// MoneyState is what the user is told about their money.
	MoneyState ledgerdb.MoneyState
	// Reason says why the charge was refused; empty when it was not.
	Reason string
}
