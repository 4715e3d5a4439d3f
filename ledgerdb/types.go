package ledgerdb

import "time"

// State is where a job stands in the billing state machine (docs/design.md).
type State string

// The job states. A job starts submitting and moves only along the machine's edges.
const (
	// StateSubmitting is the placeholder: written, not yet charged.
	StateSubmitting State = "submitting"
	// StateRejected means the charge was refused (for instance insufficient credits); nothing was charged.
	StateRejected State = "rejected"
	// StateRunning means the job is charged and its work is in progress, retries included.
	StateRunning State = "running"
	// StateDelivered means the work succeeded and was never refunded.
	StateDelivered State = "delivered"
	// StateRefunded means the work failed for good or timed out and the charge was given back.
	StateRefunded State = "refunded"
	// StateRecovered means the job was refunded, then its result landed and the refund was reclaimed.
	StateRecovered State = "recovered"
	// StateDeleted is the tombstone: the ID is burnt forever; deleting moves no money, and a
	// refunded job's late result still reclaims its refund (StateBeforeDelete then says recovered).
	StateDeleted State = "deleted"
)

// States are every state of the machine, in its order.
var States = []State{StateSubmitting, StateRejected, StateRunning, StateDelivered, StateRefunded, StateRecovered, StateDeleted}

// MoneyState is what a user is told about their money for a job.
type MoneyState string

// The money states of the state table (docs/design.md).
const (
	// MoneyPending means the job's charge is being decided: nothing was taken yet, and the hold
	// may still be (a job submitting). Only a decided job is told it was not charged.
	MoneyPending MoneyState = "pending"
	// MoneyNotCharged means nothing was taken for the job, and nothing ever will be: it was
	// rejected (or never received).
	MoneyNotCharged MoneyState = "not_charged"
	// MoneyCharged means the job's cost was taken and stands (also after a recovery).
	MoneyCharged MoneyState = "charged"
	// MoneyRefunded means the job's cost was taken and given back.
	MoneyRefunded MoneyState = "refunded"
)

// MoneyState is what the user is told about their money in this state. A deleted job keeps the
// money state it had before deletion, which only [Job.MoneyState] knows.
func (s State) MoneyState() MoneyState {
	switch s {
	case StateRunning, StateDelivered, StateRecovered:
		return MoneyCharged
	case StateRefunded:
		return MoneyRefunded
	case StateSubmitting:
		return MoneyPending
	default:
		return MoneyNotCharged
	}
}

// Job is a job's row: who pays, what it costs, where it stands, and its guard flags.
type Job struct {
	// ID is the client-generated job ID, unique within its account.
	ID string
	// AccountID is the account the job belongs to, which pays for it.
	AccountID string
	// Cost is what the job's charge holds, in credits, fixed at submission: its unit price times
	// its held units. Every charge, refund and reclaim moves exactly this amount.
	Cost int64
	// State is the job's place in the state machine.
	State State
	// StateBeforeDelete is the state the job had when it was deleted — or recovered, when a
	// deleted refunded job took its late result; empty unless State is deleted.
	StateBeforeDelete State
	// IsCharged, IsRefunded and IsReclaimed are the guard flags; each goes from false to true once.
	IsCharged, IsRefunded, IsReclaimed bool
	// Attempts is how many attempts the work has had, as last recorded.
	Attempts int
	// RejectReason says why the job was rejected: one of the RejectReason values.
	RejectReason RejectReason
	// RefundReason says why the charge was given back, as the code a customer reads (one of
	// the refund reason codes docs/api.md lists); empty until the job is refunded, and kept once it is recovered.
	RefundReason Reason
	// RefundDetail is the operator's words about the refund ("failed for good after 1 attempt:
	// …", "stopped by an operator: terminated (wrong input file)"), scrubbed of credentials when
	// written. Never shown to a customer: it may name internal hosts.
	RefundDetail string
	// CreatedAt and UpdatedAt bracket the job's life; the other times mark each transition.
	CreatedAt, UpdatedAt                                       time.Time
	ChargedAt, DeliveredAt, RefundedAt, ReclaimedAt, DeletedAt *time.Time

	// Kind is what the job is, and PriceVersion the version of the kind's price it was submitted
	// at; Unit and UnitPrice are that price's, HeldUnits the units its charge holds. All empty for
	// a job submitted with a cost, before the price list.
	Kind         string
	PriceVersion int
	Unit         Unit
	UnitPrice    int64
	HeldUnits    int64
	// UnitsUsed is the usage the job was settled at (capped at HeldUnits); nil until IsSettled.
	UnitsUsed *int64
	// IsSettled is the settlement's guard flag: set once, with UnitsUsed, when a priced job's
	// result is billed.
	IsSettled bool
	SettledAt *time.Time
	// OutputRef is the output the job's result was settled with; "" until then, or when the
	// settlement did not know it.
	OutputRef string
}

// Key names the job: its account and its ID.
func (j Job) Key() JobKey { return JobKey{AccountID: j.AccountID, JobID: j.ID} }

// Charged is what the job costs its account as it stands: the whole hold while it is charged
// and unsettled, the units used × unit price once settled, 0 when it is not charged.
func (j Job) Charged() int64 {
	switch {
	case j.MoneyState() != MoneyCharged:
		return 0
	case j.IsSettled:
		return *j.UnitsUsed * j.UnitPrice
	}
	return j.Cost
}

// WantsRows is how many ledger rows of each job kind the job's guard flags record (the
// reversing-pairs rule): one charge, refund and reclaim for each flag set, and one release for a
// settled job whose usage left part of its hold unused.
func (j Job) WantsRows() map[EntryKind]int {
	one := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	return map[EntryKind]int{
		KindCharge: one(j.IsCharged), KindRefund: one(j.IsRefunded), KindReclaim: one(j.IsReclaimed),
		KindRelease: one(j.Released() > 0),
	}
}

// Released is the part of the hold a settled job's release row gave back; 0 before settlement.
func (j Job) Released() int64 {
	if !j.IsSettled {
		return 0
	}
	return (j.HeldUnits - *j.UnitsUsed) * j.UnitPrice
}

// RejectReason says why a job was rejected before it was charged. The values are codes, stored on
// the job row; what a user reads comes from them ([RejectReason.Reason]).
type RejectReason string

// The reasons a job is rejected. Every one of them burns the job's ID for good: a rejected job can
// never be charged, so the same ID is the same rejected job for ever, and a new attempt needs a new ID.
const (
	// RejectInsufficientCredits: the account could not pay the job's cost when it was charged.
	RejectInsufficientCredits RejectReason = "insufficient_credits"
	// RejectExposureLimit: the account has so many refunded jobs awaiting a late result that
	// reclaiming them all would take its balance out of range (see [MaxBalance]).
	RejectExposureLimit RejectReason = "exposure_limit"
	// RejectWorkflowEnded: the job's workflow ended before charging it (an operator terminated
	// it, or it failed or timed out first); its ID can never start a workflow again.
	RejectWorkflowEnded RejectReason = "workflow_ended_before_charging"
	// RejectWorkflowIDTaken: the job's workflow ID is held by a workflow that is not this job's
	// metered job (another program's workflow in the namespace).
	RejectWorkflowIDTaken RejectReason = "workflow_id_taken"
)

// Describe says the reason in words, for timelines, logs and operators.
func (r RejectReason) Describe() string {
	switch r {
	case RejectInsufficientCredits:
		return "insufficient credits"
	case RejectExposureLimit:
		return "the account has too many refunded jobs awaiting a late result"
	case RejectWorkflowEnded:
		return "the job's workflow ended before charging it"
	case RejectWorkflowIDTaken:
		return "the job's workflow ID is held by another program's workflow"
	}
	return string(r)
}

// MoneyState is what the user is told about their money for this job; a deleted job keeps what
// it had before deletion.
func (j Job) MoneyState() MoneyState {
	if j.State == StateDeleted {
		return j.StateBeforeDelete.MoneyState()
	}
	return j.State.MoneyState()
}

// Net is what this job's ledger rows must sum to (the net-effect rule): minus what it is charged
// ([Job.Charged]): −(units used × unit price) once settled, the whole hold before, 0 when it is
// not charged.
func (j Job) Net() int64 { return -j.Charged() }

// EntryKind names what a ledger row records.
type EntryKind string

// The ledger row kinds.
const (
	// KindGrant is a top-up of an account (positive).
	KindGrant EntryKind = "grant"
	// KindCharge takes a job's cost (negative).
	KindCharge EntryKind = "charge"
	// KindRefund gives a job's cost back (positive).
	KindRefund EntryKind = "refund"
	// KindReclaim takes a refunded job's cost again after its result landed (negative).
	KindReclaim EntryKind = "reclaim"
	// KindRelease gives back the unused part of a settled job's hold (positive).
	KindRelease EntryKind = "release"
	// KindAdjustment is an operator's correction, either sign.
	KindAdjustment EntryKind = "adjustment"
	// KindExpire removes what a credit block still held when it expired (negative): by the expiry
	// pass, or at once when a refund or a release returns credits to a block already expired.
	KindExpire EntryKind = "expire"
)

// Entry is one immutable ledger row.
type Entry struct {
	// ID orders an account's rows: a larger ID was committed later.
	ID int64
	// AccountID is the account whose balance the row moved.
	AccountID string
	// JobID is the job a charge, refund or reclaim belongs to; empty for grants and adjustments.
	JobID string
	// Kind says what the row records.
	Kind EntryKind
	// Amount is the signed change to the balance in credits.
	Amount int64
	// BalanceAfter is the account's balance right after this row.
	BalanceAfter int64
	// Key is the caller's idempotency key of a grant or adjustment; empty for job rows.
	Key string
	// Memo is free text from the caller of a grant or adjustment.
	Memo string
	// CreatedAt is when the row was written.
	CreatedAt time.Time
	// CausedBy is, for an expiry of credits that a refund or a release returned to a block
	// already expired, that refund's or release's row; 0 otherwise.
	CausedBy int64
	// Block is the credit block a grant made or an expiry removed credits from; nil for other
	// rows and for grants from before credit blocks began.
	Block *EntryBlock
}

// EntryBlock is what a row says of the credit block it names: enough to tell the row in words.
type EntryBlock struct {
	// ID names the block.
	ID int64
	// Category is paid or promotional.
	Category BlockCategory
	// GrantedAt is when its grant made it.
	GrantedAt time.Time
	// ExpiresAt is when it expires or expired; nil: never.
	ExpiresAt *time.Time
}

// Outcome says what a guarded operation did.
type Outcome string

// The outcomes of a guarded operation.
const (
	// Applied means this call made the change (and wrote its ledger row, if it moves money).
	Applied Outcome = "applied"
	// AlreadyApplied means an earlier call made the change; this one wrote nothing.
	AlreadyApplied Outcome = "already_applied"
	// NotApplied means the job is not in a state the change applies to; nothing was written.
	NotApplied Outcome = "not_applied"
)

// Transition is the answer of a job operation.
type Transition struct {
	// Outcome says whether this call applied the change.
	Outcome Outcome
	// Job is the job as it stands after the call.
	Job Job
	// EntryID is the ledger row this call wrote; 0 when it wrote none.
	EntryID int64
	// BalanceAfter is the account's balance after this call's ledger row; meaningful only when
	// EntryID is not 0.
	BalanceAfter int64
}

// Posting is the answer of a grant or an adjustment.
type Posting struct {
	// Outcome is Applied for a new row and AlreadyApplied when the key was posted before.
	Outcome Outcome
	// EntryID is the ledger row of this key (new or earlier).
	EntryID int64
	// BalanceAfter is the balance right after that row.
	BalanceAfter int64
}
