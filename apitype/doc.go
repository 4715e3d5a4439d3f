// Package apitype holds the bodies of jobbill's HTTP API as they travel: every request body the
// API reads and every answer it writes, field for field, in the JSON names of api/openapi.yaml,
// whose schemas carry the same names as these types.
//
// It is a leaf: it imports nothing of jobbill's, so that the server (package api), the Go client
// (package apiclient) and the test that holds both to api/openapi.yaml share one definition of
// each body, and a client never pulls in the ledger or Temporal. The wire is a contract: the
// domain types the server works with (jobs.Status, ledgerdb.Price, apikeys.Key, webhooks.Endpoint
// …) may change, and package api converts them to these types, field by field, before it
// answers.
//
// Values that the API names from a fixed vocabulary — states, money states, reason codes, units,
// outcomes — are plain strings here; api/openapi.yaml lists each vocabulary, and docs/api.md says
// what each word means.
package apitype
