// Package typescript holds jobbill's TypeScript client, an npm package (package.json in this
// directory; README.md says how to use it). Its Go test runs the package's own tests — built with
// tsc, run with Node's test runner — against the real API and the real Temporal dev server, with a
// worker in the test process, so that `go test ./...` (and `make test`) checks the TypeScript
// client with no extra step.
package typescript
