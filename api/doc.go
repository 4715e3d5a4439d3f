// Package api is jobbill's HTTP API over the job service and the ledger: product code that is not Go,
// and browsers, submit and poll paid jobs with it.
//
// The answers follow the submission semantics (docs/design.md):
//
//   - POST /v1/jobs takes a client-generated job ID and the job's kind, and answers once the charge
//     is decided, its status following where the job's money then stands, as its body does (201
//     charged, 200 nothing charged by the answer: the same request again, or a job refunded before
//     the answer; 402 insufficient credits with nothing charged, 409 the ID with a different
//     request or rejected, 410 a deleted ID, 422 an unknown account or kind, 202 still deciding
//     after api.request_timeout: poll it).
//   - GET /v1/jobs/{id} answers 404 only when the ID never reached the ledger — nothing was
//     charged — and 410 when the job was deleted; otherwise the job's state, money state and a
//     sentence a user can read.
//   - GET /v1/jobs lists a page of one account's jobs, newest first, each as GET /v1/jobs/{id}
//     answers it, with a cursor for the next page ([apitype.JobList]).
//   - Every error has one shape, [apitype.Error]: a stable code, a sentence, and where it
//     applies the state of the user's money.
//
// # Prices, holds and settlement
//
// Prices are set by the server: a submission names a kind ("render-4k") and never an amount, and
// a body that carries one (cost, amount, price, unit_price or credits) is refused with 400
// price_set_by_server and nothing written — otherwise a customer could name their own price. The
// price list (GET /v1/prices, readable with any key; PUT /v1/prices/{kind} with an admin key)
// gives each kind a unit, a unit price and a maximum of units per job. A job's charge holds unit
// price × units (the kind's maximum, or the smaller max_units the submission asks for) and records
// the price version, so a later price change never reaches a submitted job. A metered job's result
// reports units_used; its settlement charges units used × unit price, capped at the hold, and
// returns the rest of the hold in one release row. A result carries no amount either.
//
// # What every answer carries
//
// Whatever the route, every answer carries an X-Request-Id (the client's own when sane), which
// every log line about the request names; every 503 and 429 says Retry-After; a bearer
// credential (or, without one, a remote address) that spends its token bucket is answered 429
// rate_limited before anything is done; and each answer is counted by route pattern and status
// (middleware.go, ratelimit.go). A body's keys must name its fields exactly and once
// (jsonkeys.go), its free text must pass the ledger's text rule, and a body over the limit is 413.
// A customer's answers carry no internal URL and no operator detail (answers.go).
//
// # Keys, scopes and accounts
//
// Callers send "Authorization: Bearer <secret>" with an API key (package apikeys), kept hashed in
// the ledger's database and read on every request, so that keys are created and revoked while
// the API runs (the admin routes under /v1/keys, or `jobbill key`). Each key has one scope, and
// the route table names the scopes each route takes (openapi.yaml's x-scopes):
//
//   - customer: one account's jobs (submit, read, delete), its balance and ledger, and the prices;
//   - customer_read: the same GET routes, and nothing that writes;
//   - runner: the GPU service, which may only report results (for every account's jobs) — the
//     usage a result reports sets what a metered job costs, so a customer key may not;
//   - admin: everything, with grants, prices, redrives and keys.
//
// The configuration's api.keys are bootstrap admin keys, a way in for a fresh deployment. No
// key, an unknown key, an expired key and a revoked key all get the same 401; a key calling
// outside its scope, or about another account (its balance, ledger or submissions), gets 403; in
// both cases nothing is written.
//
// Job IDs belong to their account: two accounts may use the same ID and get two jobs. The job
// routes act for the account of the account_id query parameter, which a key of one account may
// leave out. A key naming an account it may not act for gets exactly the answer of an ID that
// never arrived — 404 not_received — and that answer is true: in the accounts the key acts for,
// the ID never arrived, and a resubmission creates the caller's own job, never touching the other
// tenant's. So no answer (403, 409, 410) tells one tenant that another's ID exists.
//
// The document openapi.yaml beside this file describes every route; tests keep it equal to the
// routes, to the status codes and key scopes of each one, and to the fields of each body and
// answer.
//
// # Bodies on the wire
//
// Every body the API reads and every answer it writes is a type of package apitype, which the Go
// client (package apiclient) shares. A handler answers apitype's types only: the domain types of
// the job service, the ledger, the keys and the webhooks become answers in wire.go, one
// conversion each, held by TestWireAnswersAsDomainJSON to the JSON the domain type writes.
//
// # Adding a route
//
// What a route needs, and the test that fails while it is missing:
//
//  1. A line in the route table (New, server.go): method, path, the scopes that may call it and
//     every status its handler answers; the handler beside the routes of its concern.
//  2. Its bodies in package apitype, and, when it answers a domain type, a conversion in wire.go
//     with its line in TestWireAnswersAsDomainJSON.
//  3. The path, method, x-scopes, responses and schemas in openapi.yaml —
//     TestOpenAPIMatchesRoutes, TestOpenAPISchemasMatchBodies (every apitype type is a schema,
//     field for field), and the end-to-end tests, which fail on any status a route answers
//     without declaring it and on any answer its schema refuses (apitest.Conform).
//  4. A row in docs/api.md's "Routes and status codes" — TestDocsNameEveryRoute.
//  5. A method of the Go client and of the TypeScript client, or the route's line, with the
//     reason, in apiclient's outsideTheClients — TestClientsCallEveryRoute (the TypeScript client
//     must call the Go client's routes) and TestTypeScriptBodiesAreTheWireTypes.
//  6. Its scopes probed, key by key, in TestScopesOnEveryRoute, which fails on a route of the
//     table it does not probe, or probes as letting in other scopes than the table's.
package api
