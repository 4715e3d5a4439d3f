package apitype

import "time"

// EndpointRequest is the body of POST /v1/accounts/{id}/webhooks.
type EndpointRequest struct {
	// URL is where the account's events are POSTed: https, to a public address.
	URL string `json:"url"`
	// Description says what the endpoint is for (at most 200 characters).
	Description string `json:"description,omitempty"`
}

// Endpoint is an account's webhook endpoint, never with its signing secret.
type Endpoint struct {
	// ID names the endpoint ("we_…").
	ID string `json:"id"`
	// AccountID is the account whose events it receives.
	AccountID string `json:"account_id"`
	// URL is where the events are POSTed.
	URL string `json:"url"`
	// Description says what the endpoint is for.
	Description string `json:"description"`
	// Status is enabled, or disabled once deleted.
	Status string `json:"status"`
	// CreatedAt is when it was made.
	CreatedAt time.Time `json:"created_at"`
	// RotatedAt is when its secret was last replaced, if ever.
	RotatedAt *time.Time `json:"rotated_at,omitempty"`
	// DisabledAt is when it was deleted, if it was.
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
}

// EndpointCreated is the answer of POST /v1/accounts/{id}/webhooks and of its rotate route: the
// endpoint with its signing secret, shown this once.
type EndpointCreated struct {
	Endpoint
	// Secret is the signing secret ("whsec_…"), for the receiver's verifier.
	Secret string `json:"secret"`
}

// EndpointList is the answer of GET /v1/accounts/{id}/webhooks.
type EndpointList struct {
	// Endpoints are the account's endpoints, oldest first, deleted ones too; never a secret.
	Endpoints []Endpoint `json:"endpoints"`
}

// EndpointDeleted is the answer of DELETE /v1/accounts/{id}/webhooks/{endpoint}.
type EndpointDeleted struct {
	// Outcome is applied when this request deleted the endpoint, already_applied when it was
	// deleted before.
	Outcome string `json:"outcome"`
	// Endpoint is the endpoint, disabled.
	Endpoint Endpoint `json:"endpoint"`
}

// Attempt is one entry of an endpoint's delivery log.
type Attempt struct {
	// ID orders the log; pass the last one as ?before= for an older page.
	ID int64 `json:"id"`
	// EventID names the event sent ("msg_…").
	EventID string `json:"event_id"`
	// EventType is the event's type (job.charged, balance.low …).
	EventType string `json:"event_type"`
	// Attempt counts the attempts of this delivery, from 1.
	Attempt int `json:"attempt"`
	// AttemptedAt is when the attempt ended.
	AttemptedAt time.Time `json:"attempted_at"`
	// HTTPStatus is what the receiver answered; nil when it could not be reached.
	HTTPStatus *int `json:"http_status,omitempty"`
	// Error says why the attempt failed, when it did.
	Error string `json:"error,omitempty"`
	// DurationMS is how long the attempt took, in milliseconds.
	DurationMS int `json:"duration_ms"`
	// Outcome is delivered, retry (due again at NextAttemptAt) or failed (given up).
	Outcome string `json:"outcome"`
	// NextAttemptAt is when the delivery is due again, after a retry.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// AttemptLog is the answer of GET /v1/accounts/{id}/webhooks/{endpoint}/attempts.
type AttemptLog struct {
	// Attempts are the newest entries of the endpoint's delivery log, newest first.
	Attempts []Attempt `json:"attempts"`
	// NextBefore is the ?before= of the next (older) page; 0 when this page is the last.
	NextBefore int64 `json:"next_before"`
}

// ReplayRequest is the body of POST /v1/accounts/{id}/webhooks/{endpoint}/replay: one of the two.
type ReplayRequest struct {
	// EventID names one event to send again ("msg_…", a delivery log's event_id).
	EventID string `json:"event_id,omitempty"`
	// Since sends again every event of the account created at or after it, an RFC 3339 time.
	Since string `json:"since,omitempty"`
}

// Replayed is the answer of a replay.
type Replayed struct {
	// Queued is how many deliveries were queued again (one still pending is left as it is).
	Queued int `json:"queued"`
}
