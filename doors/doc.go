// Package doors holds jobbill's end-to-end door tests: what happens to a job's money when it is
// reached through a door jobbill does not control. An operator's official `temporal` CLI —
// terminate, cancel, reset, signal, start, query — is driven as a black box (a subprocess, as an
// operator types it) against a real in-process worker, the real dev server and the real Postgres
// test ledger; another program's workflow holds a job's ID; Temporal itself is down while a
// result is reported. Each test names the money rule it checks and proves it three ways: the
// job's ledger rows, its final state, and a clean audit (invariants.Check) of the test's own jobs.
//
// The package has no code of its own besides this comment: everything is in its tests, which
// need Postgres, Temporal (those the test URLs name, or, with none set, the checkout's own that the
// tests start) and the Temporal CLI (scripts/ensure-temporal.sh installs it). The test of a
// Temporal outage starts, stops and restarts a dev server of its own, never the tests' one.
package doors
