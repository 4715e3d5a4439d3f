package workflows

import (
	"strings"

	"go.temporal.io/sdk/temporal"
)

// JobWorkflowID is the workflow ID of a job's [MeteredJob]: "job/<account>/<job ID>". It carries
// the account, so that two accounts' job IDs can never meet in one workflow, and its "job/" prefix
// keeps it apart from every other workflow in the namespace: a job ID can never be a fallback's,
// a reconcile pass's, or Temporal's own (temporal-sys-…). The "/" can appear in no account or job
// ID (ledgerdb.ValidateID), so the ID reads back unambiguously ([ParseJobWorkflowID]).
//
// Runs of the original version used the bare job ID as their workflow ID; nothing starts one so
// any more.
func JobWorkflowID(accountID, jobID string) string {
	return jobWorkflowPrefix + accountID + "/" + jobID
}

// jobWorkflowPrefix starts every [JobWorkflowID].
const jobWorkflowPrefix = "job/"

// ParseJobWorkflowID reads the account and job ID back from a [JobWorkflowID]; ok is false for
// any other workflow ID.
func ParseJobWorkflowID(workflowID string) (accountID, jobID string, ok bool) {
	rest, found := strings.CutPrefix(workflowID, jobWorkflowPrefix)
	if !found {
		return "", "", false
	}
	accountID, jobID, found = strings.Cut(rest, "/")
	if !found || accountID == "" || jobID == "" || strings.Contains(jobID, "/") {
		return "", "", false
	}
	return accountID, jobID, true
}

// Names shared by the worker, the job service and the CLI. They are part of the wire contract with
// running workflows, so they never change.
const (
	// DefaultNamespace is the Temporal namespace of jobbill's own that the scripts and the compose
	// file create: a namespace no other program's workflows share, so that a job's workflow ID can
	// never be another program's (the submission checks that anyway), and jobbill's schedule and
	// search attributes are its own.
	DefaultNamespace = "jobbill"
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
	// [ChargeDecision]. The job service sends it with Update-With-Start, so a submission answers
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

// DevServerFlags are the arguments that make `temporal server start-dev` ready for jobbill: the
// namespace [DefaultNamespace], and `--search-attribute NAME=TYPE` for each of [SearchAttributes]
// (the dev server registers them in every namespace it creates).
func DevServerFlags() []string {
	flags := []string{"--namespace", DefaultNamespace}
	for _, sa := range SearchAttributes() {
		flags = append(flags, "--search-attribute", sa.Name+"="+sa.Type)
	}
	return flags
}
