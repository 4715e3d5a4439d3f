package apitype

import "time"

// SubmitRequest is the body of POST /v1/jobs. It names the job's kind and never an amount:
// prices are set by the server (GET /v1/prices), and a body that carries one is refused.
type SubmitRequest struct {
	// JobID is the client-generated job ID; a retry must reuse it, and the same ID is the same
	// job, for ever.
	JobID string `json:"job_id"`
	// AccountID is the paying account; the key must be scoped to it.
	AccountID string `json:"account_id"`
	// Kind names what the job is ("render-4k"); the price list says what it costs.
	Kind string `json:"kind"`
	// MaxUnits, for a kind metered by the GPU-second, is the most units the job may use, at most
	// the kind's own maximum; nil (left out of the body) for the kind's. The job's charge holds
	// this many units.
	MaxUnits *int64 `json:"max_units,omitempty"`
	// InputRef points at the job's input. With the account, the kind and the units held it is
	// what a repeated submission must match to be answered with the original job.
	InputRef string `json:"input_ref"`
}

// Status is a job as the API answers it (GET /v1/jobs/{id}, and inside other answers): where it
// stands, and where the user's money stands.
type Status struct {
	// JobID and AccountID identify the job.
	JobID     string `json:"job_id"`
	AccountID string `json:"account_id"`
	// Kind is what the job is; empty for a job submitted with a cost before the price list.
	Kind string `json:"kind,omitempty"`
	// PriceVersion is the version of the kind's price the job was submitted at, which a later
	// price change never alters.
	PriceVersion int `json:"price_version,omitempty"`
	// Unit ("job" or "gpu_second"), UnitPrice (credits per unit) and HeldUnits (the units the
	// charge holds) are the job's price.
	Unit      string `json:"unit,omitempty"`
	UnitPrice int64  `json:"unit_price,omitempty"`
	HeldUnits int64  `json:"held_units,omitempty"`
	// Held is what the charge holds, in credits: UnitPrice × HeldUnits.
	Held int64 `json:"held"`
	// UnitsUsed is the usage the job was settled at, capped at HeldUnits; nil until settled.
	UnitsUsed *int64 `json:"units_used,omitempty"`
	// OutputRef is the output the job's result was settled with; empty until it is delivered or
	// recovered, and once it is deleted.
	OutputRef string `json:"output_ref,omitempty"`
	// Charged is what the job costs the account as it stands: the whole hold while running,
	// UnitsUsed × UnitPrice once settled, 0 when not charged or refunded.
	Charged int64 `json:"charged"`
	// Released is the part of the hold the settlement gave back.
	Released int64 `json:"released"`
	// State is submitting, rejected, running, delivered, refunded, recovered or deleted.
	State string `json:"state"`
	// MoneyState is pending (submitting: the charge is being decided, and may still be taken),
	// not_charged (rejected: never charged, and never will be), charged or refunded.
	MoneyState string `json:"money_state"`
	// Attempts is how many attempts the work has had.
	Attempts int `json:"attempts"`
	// Reason says why a job was refunded or rejected: a code of the fixed vocabulary in
	// docs/api.md ("Reason codes"), such as timed_out or gpu_failed.
	Reason string `json:"reason,omitempty"`
	// Message is the sentence for the user, made of fixed words only.
	Message string `json:"message"`
	// Detail is for admin keys only: the operator's words about a refund or a rejection. An
	// answer to any other key leaves it out.
	Detail string `json:"detail,omitempty"`
	// CreatedAt is when the job was submitted: the order of a list of jobs, newest first.
	CreatedAt time.Time `json:"created_at"`
	// WorkflowURL is the job's page in the operator's Temporal UI; in answers to admin keys only.
	WorkflowURL string `json:"workflow_url,omitempty"`
}

// Submission is the answer of POST /v1/jobs.
type Submission struct {
	// Status is the job as it stands once its charge is decided.
	Status Status `json:"status"`
	// Duplicate is true when the ID had been submitted before with the same request: the answer
	// is the original job, and nothing new was charged.
	Duplicate bool `json:"duplicate"`
}

// JobList is the answer of GET /v1/jobs.
type JobList struct {
	// Jobs are the page's jobs, newest first (by created_at, then by job_id in descending byte
	// order), each as GET /v1/jobs/{id} answers it.
	Jobs []Status `json:"jobs"`
	// NextCursor, passed as ?cursor=, reads the next page; left out on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ResultRequest is the body of POST /v1/jobs/{id}/result: a job's result landed, with the units
// its work used. It carries no amount: the ledger bills the usage it reports at the job's recorded
// price, capped at the job's hold.
type ResultRequest struct {
	// Attempt is the attempt that produced the result.
	Attempt int `json:"attempt"`
	// OutputRef points at the result.
	OutputRef string `json:"output_ref"`
	// FinishedAt is when the work finished; the time the server receives the report when nil.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// UnitsUsed is how many units of the job's kind the work used (GPU-seconds for a metered
	// kind), a whole number from 0. Nil bills the whole hold; above the hold, it is capped at the
	// hold. A kind sold by the job ignores it: its price is fixed.
	UnitsUsed *int64 `json:"units_used,omitempty"`
}

// ResultReport is the answer of POST /v1/jobs/{id}/result: what the API did with the result.
type ResultReport struct {
	// Path is how the result reached the job: signal, fallback, recorded (durable, applied once
	// the server's workflow service is reachable) or already_applied.
	Path string `json:"path"`
	// Outcome, for the fallback, says whether this report billed the job; empty otherwise.
	Outcome string `json:"outcome,omitempty"`
	// Status is the job as it stood when the report was taken; after a signal it may predate the
	// settlement, so read the job again for the settled figures.
	Status Status `json:"status"`
	// Message says what happened, in a sentence.
	Message string `json:"message"`
}

// RedriveRequest is the optional body of POST /v1/jobs/{id}/redrive (admin).
type RedriveRequest struct {
	// By names who asks, for the workflow's timeline; "api" when empty.
	By string `json:"by"`
	// Note says why.
	Note string `json:"note"`
}
