package workflows

import (
	"go.temporal.io/sdk/temporal"
)

// Names shared by the worker, the starter and the CLI. They are part of the wire contract with
// running workflows, so they never change.
const (
	// TaskQueue is the task queue the metered job workflow and its activities run on.
	TaskQueue = "jobbill-metered-jobs"
	// WorkflowType is the metered job workflow's registered name (the function's name).
	WorkflowType = "MeteredJob"
	// SignalResult carries a [ResultSignal]: the job's result landed (possibly late).
	SignalResult = "result"
	// SignalRedrive carries a [RedriveRequest]: run a dead-lettered job's work again.
	SignalRedrive = "redrive"
	// QueryStatus answers a [JobStatus].
	QueryStatus = "status"
	// UpdateChargeDecision waits until the job's charge is decided and answers a
	// [ChargeDecision]. The starter sends it with Update-With-Start, so a submission answers
	// "charged" or "rejected" in one round trip (the early-return pattern of samples-go).
	UpdateChargeDecision = "charge-decision"
)

// Custom search attributes of the metered job workflow. The dev server and production namespaces
// must register them (see [SearchAttributes]) before the first job starts, or its upserts fail.
const (
	// SearchAttributeBillingState (Keyword) is the job's state: one of ledgerdb's State values
	// (submitting, rejected, running, delivered, refunded, recovered, deleted).
	SearchAttributeBillingState = "BillingState"
	// SearchAttributeAccountID (Keyword) is the paying account, to list an account's jobs.
	SearchAttributeAccountID = "AccountID"
	// SearchAttributeDeadLettered (Bool) is true while the job is a dead letter: its work failed
	// for good and it was refunded, and no late result or redrive has recovered it. It stays true
	// on a workflow that closed as refunded, so `DeadLettered = true` lists every dead letter,
	// open (still listening for a late result) or closed.
	SearchAttributeDeadLettered = "DeadLettered"
)

// Typed keys of the search attributes above, for workflow.UpsertTypedSearchAttributes and for
// client.StartWorkflowOptions.TypedSearchAttributes.
var (
	// BillingStateKey is the typed key of SearchAttributeBillingState.
	BillingStateKey = temporal.NewSearchAttributeKeyKeyword(SearchAttributeBillingState)
	// AccountIDKey is the typed key of SearchAttributeAccountID.
	AccountIDKey = temporal.NewSearchAttributeKeyKeyword(SearchAttributeAccountID)
	// DeadLetteredKey is the typed key of SearchAttributeDeadLettered.
	DeadLetteredKey = temporal.NewSearchAttributeKeyBool(SearchAttributeDeadLettered)
)

// SearchAttributeDefinition is a custom search attribute to register, with its type spelled as
// `temporal server start-dev --search-attribute NAME=TYPE` and
// `temporal operator search-attribute create --type TYPE` spell it.
type SearchAttributeDefinition struct {
	// Name is the attribute's name.
	Name string
	// Type is Keyword, Bool, Int, Double, Text, Datetime or KeywordList.
	Type string
}

// SearchAttributes lists every custom search attribute the workflow upserts, in a fixed order.
func SearchAttributes() []SearchAttributeDefinition {
	return []SearchAttributeDefinition{
		{Name: SearchAttributeBillingState, Type: "Keyword"},
		{Name: SearchAttributeAccountID, Type: "Keyword"},
		{Name: SearchAttributeDeadLettered, Type: "Bool"},
	}
}

// DevServerFlags are the `--search-attribute NAME=TYPE` arguments that register
// [SearchAttributes] on `temporal server start-dev`.
func DevServerFlags() []string {
	var flags []string
	for _, sa := range SearchAttributes() {
		flags = append(flags, "--search-attribute", sa.Name+"="+sa.Type)
	}
	return flags
}
