package jobbill_test

// The packages' layers, as the pages and the package comments state them ("a leaf", "knows
// nothing about Temporal", "below worker and api", "kept out of the product"), checked against
// what the code imports, read from `go list -deps -json ./...`. Each of jobbill's packages has a
// row: the packages of jobbill's it may import itself, and what it may never reach, directly or
// through any other package, a third party's included. A package without a row fails the test:
// a new package says where it sits. docs/orientation.md ("Layers") tells the rows in words.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is jobbill's module path; the table names its packages relative to it ("" is the root).
const module = "github.com/jobbill/jobbill"

// A role says which of jobbill's packages a package may never reach whatever its row says: the
// product (what `jobbill` runs and what product code imports) reaches neither the tooling nor a
// test helper, and the tooling reaches no test helper.
type role int

const (
	product role = iota
	tooling
	testHelper
)

// layer is one package's row.
type layer struct {
	role role
	// imports are the packages of jobbill's it may import itself; anyOfOurs lets it import any
	// (within its never).
	imports   []string
	anyOfOurs bool
	// never are import paths it may not reach at all, directly or through other packages, as go's
	// patterns: "x" is the package x, "x/..." is x and every package under it.
	never []string
	// neverItself are paths it may not import itself; what it reaches through another package of
	// jobbill's is that package's row's business.
	neverItself []string
	// claim is why: the sentence of the docs it keeps, or where the package sits.
	claim string
	// optional marks a row for a package that may not exist yet.
	optional bool
}

// ourPaths are import paths of jobbill's packages, given relative to the module.
func ourPaths(rel ...string) []string {
	paths := make([]string, len(rel))
	for i, r := range rel {
		paths[i] = module + "/" + r
	}
	return paths
}

// join is the lists one after another, in a new slice.
func join(lists ...[]string) []string { return slices.Concat(lists...) }

var (
	temporalSDK = []string{"go.temporal.io/..."}
	// sqlDrivers are the ways to a database: pgx (and its pgconn), tern, database/sql.
	sqlDrivers = []string{"github.com/jackc/pgx/...", "github.com/jackc/pgconn/...", "github.com/jackc/tern/...", "database/sql/...", "github.com/lib/pq/..."}
	// testHelpers are the packages only tests may import.
	testHelpers = ourPaths("ledgerdb/ledgertest", "worker/workertest", "activities/activitiestest", "webhooks/webhookstest", "internal/pgtest", "api/apitest")
	// toolingPackages are cmd/jobbill-dev's, kept out of the product.
	toolingPackages = ourPaths("cmd/jobbill-dev", "internal/chaos", "internal/ledgerbench", "internal/workerbench", "internal/stories", "internal/devserver", "internal/devdir")
)

// layers is the table, one row per package of jobbill's.
var layers = map[string]layer{
	"": {claim: "the root holds the deployment files' and the pages' tests, no code"},

	// The leaves.
	"apitype": {never: join(temporalSDK, sqlDrivers, ourPaths("ledgerdb/...")),
		claim: "README.md and apitype/doc.go: a leaf that imports nothing of jobbill's, so that a client never pulls in the ledger or Temporal"},
	"internal/jsonint": {claim: "the one rule for integers in JSON at every door: a leaf every door may use"},
	"plural":           {claim: "plural/plural.go: the one home of words that agree with their numbers, a leaf every page and answer may use"},
	"ledgerdb": {never: temporalSDK,
		claim: "README.md and ledgerdb/doc.go: the schema and every guarded money operation; it knows nothing about Temporal, and sits below every other package"},
	"ledgerdb/ledgermodel": {never: sqlDrivers,
		claim: "a reference model of the money rules: it imports nothing of jobbill's and no SQL, so that it states the rules apart from the code that keeps them"},

	// Above the ledger.
	"activities": {imports: []string{"ledgerdb"},
		claim: "README.md: thin Temporal activities over the ledger"},
	"apikeys": {imports: []string{"ledgerdb"}, claim: "API keys, kept in the ledger's database"},
	"metrics": {imports: []string{"ledgerdb"}, claim: "counters of the ledger's calls and the SDK's metrics"},
	"workflows": {imports: []string{"activities", "internal/jsonint", "plural", "ledgerdb"}, neverItself: sqlDrivers,
		claim: "workflows/workflow.go: every step that moves money is a guarded ledger call through activities, never a database of the workflow's own (it uses ledgerdb's words — states, kinds, reasons — which bring the driver along)"},
	"config":     {imports: []string{"workflows"}, claim: "the one configuration package; workflows gives it the defaults of the namespace and the task queue"},
	"jobs":       {imports: []string{"activities", "plural", "ledgerdb", "workflows"}, claim: "the job service product code imports: the ledger's placeholder, then the workflow"},
	"invariants": {imports: []string{"ledgerdb", "workflows"}, claim: "checks the money rules across the ledger and Temporal"},
	"webhooks": {anyOfOurs: true, never: ourPaths("app", "app/connect", "api", "console", "worker"),
		claim: "webhooks/doc.go: the events derived from the ledger's rows and the worker that delivers them, which app runs beside the Temporal worker"},

	// The processes' parts.
	"app/connect": {imports: []string{"config", "jobs", "ledgerdb", "metrics"}, never: ourPaths("app", "api", "console", "worker"),
		claim: "README.md and app/connect/connect.go: below worker and api, so that the processes, the commands and worker/workertest connect in one place without importing each other"},
	"worker": {imports: []string{"activities", "config", "jobs", "ledgerdb", "metrics", "workflows"}, never: ourPaths("app", "api", "console"),
		claim: "worker/worker.go: the Temporal worker and its passes, which package app runs"},
	"api": {anyOfOurs: true, never: ourPaths("app", "app/connect", "console", "worker"),
		claim: "docs/orientation.md: the HTTP API over the job service and the ledger, which app/api.go builds over its connections; the console is handed to it as a handler (app/api.go NewAPI), never imported"},
	"console": {anyOfOurs: true, never: ourPaths("app", "app/connect", "worker"),
		claim: "console/doc.go: pages `jobbill api` serves, over the job service and the ledger app/api.go hands it; it reads filters with the API's own code (package api)"},
	"apiclient": {imports: []string{"apitype"}, never: join(temporalSDK, sqlDrivers, ourPaths("ledgerdb/...")),
		claim: "apitype/doc.go: a client never pulls in the ledger or Temporal; its bodies are apitype's"},
	"internal/cli": {imports: []string{"app/connect", "config", "jobs", "ledgerdb"},
		claim: "internal/cli/cli.go: what both commands share, so the product's part of them"},
	"app":         {anyOfOurs: true, claim: "runs the worker process and the API process"},
	"cmd/jobbill": {anyOfOurs: true, claim: "README.md: the product binary; cmd/jobbill-dev, the tooling, is kept out of it"},

	// The tooling.
	"cmd/jobbill-dev":      {role: tooling, anyOfOurs: true, claim: "README.md: the tooling, kept out of the product"},
	"internal/chaos":       {role: tooling, anyOfOurs: true, claim: "the chaos driver (jobbill-dev chaos)"},
	"internal/ledgerbench": {role: tooling, anyOfOurs: true, claim: "the ledger benchmark (jobbill-dev bench-ledger)"},
	"internal/workerbench": {role: tooling, anyOfOurs: true, claim: "the workflow benchmark (jobbill-dev bench-workflow)"},
	"internal/stories":     {role: tooling, anyOfOurs: true, claim: "the stories of make run (jobbill-dev run)"},
	"internal/devserver": {role: tooling, imports: []string{"internal/devdir", "workflows"},
		claim: "a Temporal dev server of a caller's own: the chaos run's, the tests'"},
	"internal/devdir": {role: tooling, claim: "the checkout's .dev and its lock: a leaf"},

	// The test helpers, and the packages that hold only tests.
	"ledgerdb/ledgertest": {role: testHelper, imports: []string{"internal/devdir", "internal/pgtest", "ledgerdb"}, never: temporalSDK,
		claim: "the ledger's test helpers know nothing about Temporal, as the ledger does"},
	"internal/pgtest": {role: testHelper, imports: []string{"internal/devdir"}, never: temporalSDK,
		claim: "ledgertest's throwaway Postgres, Temporal-free as ledgertest is"},
	"activities/activitiestest": {role: testHelper, imports: []string{"activities", "ledgerdb"},
		claim: "the in-memory ledger of the workflow tests"},
	"webhooks/webhookstest": {role: testHelper, imports: []string{"webhooks"}, claim: "the webhook tests' receiver"},
	"api/apitest": {role: testHelper, never: join(temporalSDK, sqlDrivers),
		claim: "api/apitest/conform.go: holds every answer the API's tests provoke to api/openapi.yaml, knowing nothing of the code that made it"},
	"worker/workertest": {role: testHelper,
		imports: []string{"app/connect", "config", "internal/devdir", "internal/devserver", "jobs", "ledgerdb", "ledgerdb/ledgertest", "worker", "workflows"},
		never:   ourPaths("app", "cmd/..."),
		claim:   "app/connect/connect.go: a worker of the tests' own, connected as the processes are, without importing them"},
	"doors":              {claim: "the door tests: no code besides its comment"},
	"clients/typescript": {claim: "the TypeScript client's Go test: no code besides its comment"},
}

// goPackage is what the test reads of `go list -json`.
type goPackage struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

// listPackages is every package `go list -deps ./...` names: jobbill's and all they import.
func listPackages(t *testing.T) map[string]goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Standard", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]goPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// ours answers a path of jobbill's relative to the module, and whether it is one.
func ours(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// under reports whether path matches rule, a package or a tree ("x/...").
func under(path, rule string) bool {
	if tree, ok := strings.CutSuffix(rule, "/..."); ok {
		return path == tree || strings.HasPrefix(path, tree+"/")
	}
	return path == rule
}

// name is a path as a failure shows it: jobbill's relative to the module ("." for the root).
func name(path string) string {
	if rel, ok := ours(path); ok {
		if rel == "" {
			return "."
		}
		return rel
	}
	return path
}

// forbidden is what a row forbids its package to reach, its role's share included.
func (l layer) forbidden() []string {
	switch l.role {
	case product:
		return join(testHelpers, toolingPackages, l.never)
	case tooling:
		return join(testHelpers, l.never)
	}
	return join(l.never)
}

// pathTo answers the shortest chain of imports from one package to the first it reaches that
// lies under rule, or nil when it reaches none. The standard library is not walked: it imports
// only itself.
func pathTo(pkgs map[string]goPackage, from, rule string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, imp := range pkgs[cur].Imports {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = cur
			if under(imp, rule) {
				var chain []string
				for p := imp; p != ""; p = prev[p] {
					chain = append([]string{name(p)}, chain...)
				}
				return chain
			}
			if !pkgs[imp].Standard {
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// TestPackagesKeepTheirLayers checks every package of jobbill's against its row of layers: it
// imports only the packages of jobbill's its row allows, none its row forbids it to import itself,
// and reaches — directly, or through any other package — none its row or role forbids. A failure
// names the package, the forbidden import and the chain of imports that brought it.
func TestPackagesKeepTheirLayers(t *testing.T) {
	pkgs := listPackages(t)
	listed := map[string]bool{}
	for path := range pkgs {
		rel, ok := ours(path)
		if !ok {
			continue
		}
		listed[rel] = true
		l, ok := layers[rel]
		if !ok {
			t.Errorf("package %s has no row in layers_test.go: say which of jobbill's packages it may import, and what it must never reach", name(path))
			continue
		}
		for _, imp := range pkgs[path].Imports {
			if dep, isOurs := ours(imp); isOurs && !l.anyOfOurs && !slices.Contains(l.imports, dep) {
				t.Errorf("%s imports %s, which its row does not allow (%s)", name(path), dep, l.claim)
			}
			for _, rule := range l.neverItself {
				if under(imp, rule) {
					t.Errorf("%s imports %s itself, which it may not (%s)", name(path), imp, l.claim)
				}
			}
		}
		for _, rule := range l.forbidden() {
			if chain := pathTo(pkgs, path, rule); chain != nil {
				t.Errorf("%s reaches %s, which it must never import (%s): %s", name(path), chain[len(chain)-1], l.claim, strings.Join(chain, " → "))
			}
		}
	}
	for rel, l := range layers {
		if !listed[rel] && !l.optional {
			t.Errorf("layers_test.go has a row for %s, which is no package: remove the row, or say where the package went", rel)
		}
	}
}

// TestLayersCatchAForbiddenPath checks the check itself on a graph of its own: a package that
// reaches Temporal through two others is caught, with the whole chain named, and one that does not
// is not.
func TestLayersCatchAForbiddenPath(t *testing.T) {
	pkgs := map[string]goPackage{
		module + "/ledgerdb":        {ImportPath: module + "/ledgerdb", Imports: []string{"fmt", "example.com/orm"}},
		"example.com/orm":           {ImportPath: "example.com/orm", Imports: []string{"example.com/orm/tracing"}},
		"example.com/orm/tracing":   {ImportPath: "example.com/orm/tracing", Imports: []string{"go.temporal.io/sdk/client"}},
		"go.temporal.io/sdk/client": {ImportPath: "go.temporal.io/sdk/client"},
		"fmt":                       {ImportPath: "fmt", Standard: true},
		module + "/apitype":         {ImportPath: module + "/apitype", Imports: []string{"fmt"}},
	}
	want := []string{"ledgerdb", "example.com/orm", "example.com/orm/tracing", "go.temporal.io/sdk/client"}
	if got := pathTo(pkgs, module+"/ledgerdb", "go.temporal.io/..."); !slices.Equal(want, got) {
		t.Errorf("the chain to Temporal: got %v, want %v", got, want)
	}
	if got := pathTo(pkgs, module+"/apitype", "go.temporal.io/..."); got != nil {
		t.Errorf("apitype reaches no Temporal, got %v", got)
	}
	if got := layers["worker/workertest"].forbidden(); !slices.Contains(got, module+"/app") || slices.Contains(got, module+"/internal/devserver") {
		t.Errorf("a test helper may reach the tooling but not app: %v", got)
	}
}
