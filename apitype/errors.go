package apitype

// Error is the one shape of every error the API answers.
type Error struct {
	// Code is stable and meant for programs: invalid_input, body_too_large, headers_too_large,
	// price_set_by_server, unauthorized, forbidden, not_received, deleted, conflict, job_active,
	// insufficient_credits, rejected, not_started, unknown_account, unknown_kind, unknown_key,
	// not_dead_lettered, workflow_id_taken, unknown_endpoint, endpoint_deleted, unknown_event,
	// too_many_endpoints, out_of_range, no_route, method_not_allowed, rate_limited, unavailable,
	// internal.
	Code string `json:"code"`
	// Message is a sentence for a person.
	Message string `json:"message"`
	// MoneyState says where the user's money stands, where the error is about a job of the caller
	// (pending, not_charged, charged, refunded); "unknown" when the server cannot tell.
	MoneyState string `json:"money_state,omitempty"`
	// State is the job's state, where the error is about a job of the caller.
	State string `json:"state,omitempty"`
}
