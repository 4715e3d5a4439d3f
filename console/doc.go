// Package console is jobbill's web console: server-rendered pages, served by `jobbill api` under
// /console/ on the API's own listener, where a customer sees their money and an operator answers
// "why was I charged twice?".
//
// A customer (a customer or customer_read key) sees the balance now and drawn over time from the
// ledger's rows, the jobs with the filters of GET /v1/jobs, each job's money explained row by row
// in the fixed words the API uses (package jobs), and a statement to download. An operator (an
// admin key) sees any account the same way, and besides: each job's operator detail and its
// Temporal UI timeline, heal state and recorded results; dead letters with their redrive;
// alarms; prices and their history; keys, with their revocation.
//
// Pages read well without JavaScript, and the console sends none: templates (html/template) and
// a stylesheet are embedded in the binary, and the balance chart is SVG drawn on the server.
//
// Signing in: a key is pasted once into the sign-in form (a POST body, never a URL) and becomes a
// session (package apikeys): an opaque, HttpOnly, SameSite=Strict cookie — Secure behind TLS —
// whose SHA-256 alone the database keeps, expiring, ended by signing out and by the key's
// revocation. Every form carries a CSRF token derived from the session's token; a strict
// Content-Security-Policy allows nothing but the console's own stylesheet and forms; a page of an
// account the session may not read answers exactly as a page that does not exist.
//
// The console limits its own rate, which the API's limit leaves to it: each session has a token
// bucket, a page view counting once, and what comes before a session counts against its address.
// Every answer, refusals included (404, 405, 429, 503), is the console's own page under its
// headers. A form's POST redirects to a page that says once, in one of the console's fixed
// sentences, what the form did (notice.go); revoking a key, which is final, asks first.
package console
