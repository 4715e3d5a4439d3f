// Package webhooks sends an account's money events to receivers of its own, signed: the events,
// derived after the fact from the ledger's own rows (every transition of a job, and a balance
// falling below its threshold; the money transaction writes nothing for them,
// ledgerdb/code/webhooks_derive.sql), the endpoints that receive them, and the worker that
// derives and delivers them (docs/design.md, "Webhooks").
//
// Deliveries follow the Standard Webhooks scheme (https://www.standardwebhooks.com), signed and
// verified with its Go library: each POST carries webhook-id (the event's ID, the same on every
// attempt, so a receiver recognises a duplicate), webhook-timestamp and webhook-signature
// ("v1,<base64 HMAC-SHA256 over id.timestamp.body>" with the endpoint's "whsec_…" secret).
//
// Guarantees: at least once; a job's events reach each endpoint in order (a later one waits
// until the earlier one is delivered or given up); retried with exponential backoff and jitter
// for webhooks.max_age (three days) from when it could first be sent (waiting behind a job's
// earlier event does not count), then marked failed, logged and visible in the endpoint's
// delivery log; several workers deliver together safely.
package webhooks
