package workflows

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
)

// JobInput starts a metered job. Its workflow ID is [JobWorkflowID] of its account and job ID.
// The job service writes the job's placeholder in the ledger first; a run started without one (by
// another Temporal client) writes it itself, with the same request fingerprint. On the wire it is
// contract/job-input.schema.json (contract.go); its Go field names are the legacy form.
type JobInput struct {
	// JobID is the client's job ID.
	JobID string
	// AccountID is the paying account; it becomes the AccountID search attribute.
	AccountID string
	// Kind names what the job is; the ledger prices it from the price list. Empty only for a job
	// submitted with a cost before the price list, which the ledger already holds.
	Kind string `json:",omitempty"`
	// MaxUnits is the client's smaller maximum of units for a metered kind; 0 for the kind's.
	MaxUnits int64 `json:",omitempty"`
	// Cost is what runs of the first versions carried: the caller's price, for display. The
	// ledger never moved it (the price-list rule), and a run of the current version refuses an
	// input that carries one: prices are set by the server.
	Cost int64 `json:",omitempty"`
	// Work says what to run; the job's IDs and Attempt are filled in by the workflow and the
	// activity.
	Work activities.WorkRequest
	// Policy is how the work is retried and how long a late result is awaited; zero fields take
	// the defaults of [DefaultPolicy].
	Policy Policy
	// Heal, when set, makes this run the compensation of an earlier run of the job that ended
	// without settling it (terminated, failed, timed out): it refunds the job's charge instead of
	// running its work, and then waits for a late result like any refunded job. The reconcile
	// pass starts such runs.
	Heal *HealRequest `json:",omitempty"`

	// problem is why the input could not be decoded, or nil; Validate reports it.
	problem error
	// asWritten is the input as its sender wrote it, kept only when its integers were written
	// with a zero fraction or an exponent: see readAsBefore.
	asWritten []byte
}

// HealRequest says why a job's earlier run is being compensated.
type HealRequest struct {
	// Code is the refund's reason code, what the job's customer is told: stopped_by_operator for
	// a run an operator terminated or cancelled, interrupted for one that failed, timed out or
	// vanished. Empty in the heal runs started before the codes, which refund as unknown.
	Code ledgerdb.Reason `json:"code,omitempty"`
	// Reason is the refund's detail for operators, e.g. "stopped by an operator: terminated
	// (wrong input file)"; it is scrubbed of credentials before it is kept or shown.
	Reason string `json:"reason"`
	// PreviousRunID is the run that ended unsettled.
	PreviousRunID string `json:"previous_run_id"`
}

// UnmarshalJSON reads the contract's form or the legacy one.
func (h *HealRequest) UnmarshalJSON(data []byte) error {
	type plain HealRequest
	return decodeContract(data, (*plain)(h))
}

// Job names the job: its account and its ID.
func (in JobInput) Job() ledgerdb.JobKey {
	return ledgerdb.JobKey{AccountID: in.AccountID, JobID: in.JobID}
}

// Validate says why a run of the current version cannot bill this input under workflowID, or
// nil: the IDs must be ledger IDs, the workflow ID must be the job's ([JobWorkflowID]), the kind a
// kind's name and no amount given, the input and policy within bounds. A run refuses an invalid
// input before it touches the ledger.
func (in JobInput) Validate(workflowID string) error {
	return in.validate(workflowID, latestMeteredJobVersion)
}

// validate is Validate as a run of version v checks it: runs from before the price list carried
// a cost and no kind.
func (in JobInput) validate(workflowID string, v workflow.Version) error {
	if in.problem != nil {
		return in.problem
	}
	if err := ledgerdb.ValidateID("job ID", in.JobID); err != nil {
		return err
	}
	if err := ledgerdb.ValidateID("account ID", in.AccountID); err != nil {
		return err
	}
	if want := JobWorkflowID(in.AccountID, in.JobID); workflowID != want {
		// The workflow ID is what makes a job unique in Temporal (the remembered-IDs rule); a run
		// billing another job than its ID names would defeat it.
		return fmt.Errorf("the workflow ID is %q; the job's must be %q", workflowID, want)
	}
	switch {
	case v < versionPrices:
		if err := ledgerdb.ValidateAmount("cost", in.Cost); err != nil {
			return err
		}
	case in.Cost != 0:
		return fmt.Errorf("the input carries a cost (%d); prices are set by the server: name the job's kind", in.Cost)
	case in.Kind != "":
		if err := ledgerdb.ValidateKind(in.Kind); err != nil {
			return err
		}
	}
	if in.MaxUnits < 0 || in.MaxUnits > ledgerdb.MaxUnits {
		return fmt.Errorf("max units is %d; it must be between 1 and %d, or 0 for the kind's maximum", in.MaxUnits, ledgerdb.MaxUnits)
	}
	switch {
	case len(in.Work.InputRef) > ledgerdb.MaxRequestLength:
		return fmt.Errorf("the input reference is %d bytes; at most %d are allowed", len(in.Work.InputRef), ledgerdb.MaxRequestLength)
	case !utf8.ValidString(in.Work.InputRef):
		return errors.New("the input reference is not valid UTF-8")
	}
	return in.Policy.Validate()
}

// StaticSummary is the one-line summary the job service gives the workflow
// (client.StartWorkflowOptions.StaticSummary), shown in the UI's workflow list: the job, its kind
// and the paying account, and held, the credits its charge holds as the ledger recorded them. It
// stays under the UI's 200-byte limit for any valid IDs and kinds.
func (in JobInput) StaticSummary(held int64) string {
	if in.Kind == "" {
		return fmt.Sprintf("%s: %d credits from %s", in.JobID, held, in.AccountID)
	}
	return fmt.Sprintf("%s: %s, %d credits held from %s", in.JobID, in.Kind, held, in.AccountID)
}

// Policy is how the work activity is retried, and how long a refunded job waits for a late result.
// Its mapstructure tags are its configuration keys (policy.* in package config).
type Policy struct {
	// InitialInterval is the wait before the first retry.
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	// BackoffCoefficient multiplies the wait after each retry (at least 1).
	BackoffCoefficient float64 `mapstructure:"backoff_coefficient"`
	// MaximumInterval caps the wait between retries.
	MaximumInterval time.Duration `mapstructure:"maximum_interval"`
	// MaximumAttempts is how many attempts the work gets before the job is refunded and
	// dead-lettered; it is the dead-letter point.
	MaximumAttempts int32 `mapstructure:"maximum_attempts"`
	// StartToClose is the longest one attempt may run.
	StartToClose time.Duration `mapstructure:"start_to_close"`
	// HeartbeatTimeout is how long an attempt may go without a heartbeat before Temporal takes it
	// for dead; it is also how fast a cancellation reaches it.
	HeartbeatTimeout time.Duration `mapstructure:"heartbeat_timeout"`
	// LateResultWindow is how long a refunded job keeps listening for a late result (and for a
	// redrive) before the workflow closes.
	LateResultWindow time.Duration `mapstructure:"late_result_window"`
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

// maxPolicyDuration bounds every duration of a [Policy]: beyond it a timer or timeout is a
// mistake, and Temporal would refuse it or overflow.
const maxPolicyDuration = 10 * 365 * 24 * time.Hour

// maxPolicyAttempts bounds [Policy.MaximumAttempts].
const maxPolicyAttempts = 1000

// Validate says why Temporal could not run the work under p, or nil. Zero fields are valid: they
// take the defaults.
func (p Policy) Validate() error {
	// A slice, not a map: the workflow runs this, so the refusal must name the same field on
	// every run and replay.
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"initial interval", p.InitialInterval}, {"maximum interval", p.MaximumInterval},
		{"start-to-close timeout", p.StartToClose}, {"heartbeat timeout", p.HeartbeatTimeout},
		{"late-result window", p.LateResultWindow},
	} {
		if f.d < 0 || f.d > maxPolicyDuration {
			return fmt.Errorf("the policy's %s is %s; it must be between 0 and %s", f.name, f.d, maxPolicyDuration)
		}
	}
	switch {
	case math.IsNaN(p.BackoffCoefficient) || p.BackoffCoefficient < 0 || p.BackoffCoefficient > 100:
		return fmt.Errorf("the policy's backoff coefficient is %v; it must be between 1 and 100 (0 for the default)", p.BackoffCoefficient)
	case p.MaximumAttempts < 0 || p.MaximumAttempts > maxPolicyAttempts:
		return fmt.Errorf("the policy's maximum attempts is %d; it must be between 1 and %d (0 for the default)", p.MaximumAttempts, maxPolicyAttempts)
	}
	return nil
}

// WithDefaults returns p with every zero field taken from [DefaultPolicy].
func (p Policy) WithDefaults() Policy { return p.Or(DefaultPolicy()) }

// Or returns p with every zero field taken from d, and a maximum interval no shorter than the
// initial one (the server refuses a retry policy whose maximum is below its initial interval).
func (p Policy) Or(d Policy) Policy {
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

// WorkActivityOptions are the work activity's options under p, which must have its defaults
// (WithDefaults): Temporal's retry policy runs the attempts, and summary names the step in the
// UI timeline.
func (p Policy) WorkActivityOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: p.StartToClose,
		HeartbeatTimeout:    p.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        p.InitialInterval,
			BackoffCoefficient:     p.BackoffCoefficient,
			MaximumInterval:        p.MaximumInterval,
			MaximumAttempts:        p.MaximumAttempts,
			NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
		},
		Summary: summary,
	}
}

// ResultSignal is the payload of [SignalResult]: the job's result landed. It never carries an
// amount; the ledger reclaims the job's recorded cost (the price-list rule). On the wire it is
// contract/result-signal.schema.json.
type ResultSignal struct {
	// ContractVersion is the contract the sender wrote; 0 (absent) is version 1.
	ContractVersion int `json:"contract_version,omitempty"`
	// Attempt is the attempt that produced the result.
	Attempt int `json:"attempt"`
	// OutputRef points at the job's output.
	OutputRef string `json:"output_ref"`
	// FinishedAt is when the work finished, by the runner's clock.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// UnitsUsed is how many units of the job's kind the work used (GPU-seconds for a metered
	// kind): the only number a result carries, capped by the ledger at the job's hold. Nil when
	// the reporter did not say; the job is then billed its whole hold.
	UnitsUsed *int64 `json:"units_used,omitempty"`
}

// UnmarshalJSON reads the contract's form or the legacy one; unknown fields are refused.
func (s *ResultSignal) UnmarshalJSON(data []byte) error {
	type plain ResultSignal
	return decodeContract(data, (*plain)(s))
}

// Validate says why a result cannot be taken, or nil: the attempt must be one the job's work
// may have run (from 1 to maxAttempt), the output reference a valid one and the usage, if any,
// not negative (ledgerdb's rules).
func (s ResultSignal) Validate(maxAttempt int) error {
	if err := checkContractVersion(s.ContractVersion); err != nil {
		return err
	}
	if s.Attempt < 1 || s.Attempt > maxAttempt {
		return fmt.Errorf("attempt %d is not an attempt of this job (1 to %d)", s.Attempt, maxAttempt)
	}
	if err := ledgerdb.ValidateUnitsUsed(s.UnitsUsed); err != nil {
		return err
	}
	return ledgerdb.ValidateOutputRef(s.OutputRef)
}

// RedriveRequest is the payload of [SignalRedrive]; on the wire it is
// contract/redrive-signal.schema.json.
type RedriveRequest struct {
	// ContractVersion is the contract the sender wrote; 0 (absent) is version 1.
	ContractVersion int `json:"contract_version,omitempty"`
	// By names who asked (an operator, a CLI user), for the timeline.
	By string `json:"by"`
	// Note says why.
	Note string `json:"note,omitempty"`
}

// UnmarshalJSON reads the contract's form or the legacy one; unknown fields are refused.
func (r *RedriveRequest) UnmarshalJSON(data []byte) error {
	type plain RedriveRequest
	return decodeContract(data, (*plain)(r))
}

// MaxRedriveByLength is the longest [RedriveRequest.By], in bytes.
const MaxRedriveByLength = 128

// Validate says why a redrive request cannot be taken, or nil: who asked and why must be short,
// printable text.
func (r RedriveRequest) Validate() error {
	if err := checkContractVersion(r.ContractVersion); err != nil {
		return err
	}
	switch {
	case len(r.By) > MaxRedriveByLength:
		return fmt.Errorf("by is %d bytes; at most %d are allowed", len(r.By), MaxRedriveByLength)
	case len(r.Note) > ledgerdb.MaxTextLength:
		return fmt.Errorf("the note is %d bytes; at most %d are allowed", len(r.Note), ledgerdb.MaxTextLength)
	case ledgerdb.ClipText(r.By) != r.By || !utf8.ValidString(r.Note):
		return errors.New("by and note must be valid UTF-8 without control characters")
	}
	return nil
}

// JobStatus is the answer of [QueryStatus] and the workflow's result; on the wire it is
// contract/job-status.schema.json.
type JobStatus struct {
	// JobID and AccountID identify the job.
	JobID     string `json:"job_id"`
	AccountID string `json:"account_id"`
	// Cost is what the job's charge holds, in credits, as the ledger answered the charge (display
	// only; 0 until then).
	Cost int64 `json:"cost"`
	// Kind is the job's kind; empty for a job submitted with a cost before the price list.
	Kind string `json:"kind,omitempty"`
	// UnitsUsed is the usage the job was settled at; nil until it is settled.
	UnitsUsed *int64 `json:"units_used,omitempty"`
	// Charged is what the job costs its account as the ledger last answered, and Released the
	// part of the hold its settlement gave back.
	Charged  int64 `json:"charged,omitempty"`
	Released int64 `json:"released,omitempty"`
	// State is where the job stands; it is the BillingState search attribute.
	State ledgerdb.State `json:"state"`
	// MoneyState is what the user is told about their money.
	MoneyState ledgerdb.MoneyState `json:"money_state"`
	// Attempts is how many attempts the work had, as far as the workflow knows.
	Attempts int `json:"attempts"`
	// DeadLettered is true while the job is refunded and not recovered; it is the DeadLettered
	// search attribute.
	DeadLettered bool `json:"dead_lettered"`
	// Reason says why the job was rejected (its reject reason code) or refunded (the refund's
	// detail, scrubbed): for operators, in the Temporal UI; a customer reads the ledger's code.
	Reason string `json:"reason"`
	// OutputRef points at the job's output once it was delivered or recovered.
	OutputRef string `json:"output_ref"`
	// Redrives counts the redrives run.
	Redrives int `json:"redrives"`
	// IgnoredResults counts result signals that changed nothing because the job had settled.
	IgnoredResults int `json:"ignored_results"`
	// IgnoredSignals counts signals refused because their payload was invalid (an attempt that
	// never ran, an unreadable payload); the job went on without them.
	IgnoredSignals int `json:"ignored_signals,omitempty"`
	// LastIgnored says why the last of them was refused.
	LastIgnored string `json:"last_ignored,omitempty"`
	// Alarm, when set, says which ledger step the database refused for good: the job needs an
	// operator (the invariant checker reports it too).
	Alarm string `json:"alarm,omitempty"`
}

// UnmarshalJSON reads the contract's form or the legacy one (the results of runs recorded before
// the contract).
func (st *JobStatus) UnmarshalJSON(data []byte) error {
	type plain JobStatus
	return decodeContract(data, (*plain)(st))
}

// ChargeDecision is the answer of [UpdateChargeDecision]: whether the job was charged. On the wire
// it is contract/charge-decision.schema.json.
type ChargeDecision struct {
	// State is the job's state right after its charge was decided: running when charged now,
	// rejected when refused, or a later state when an earlier run of this ID already billed it.
	State ledgerdb.State `json:"state"`
	// MoneyState is what the user is told about their money.
	MoneyState ledgerdb.MoneyState `json:"money_state"`
	// Reason says why the charge was refused; empty when it was not.
	Reason string `json:"reason"`
}

// UnmarshalJSON reads the contract's form or the legacy one.
func (d *ChargeDecision) UnmarshalJSON(data []byte) error {
	type plain ChargeDecision
	return decodeContract(data, (*plain)(d))
}
