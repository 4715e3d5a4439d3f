package apiclient_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apitype"
)

// outsideTheClients are the routes the Go and TypeScript clients leave to raw HTTP, and why. The
// clients are for product code, with customer and runner keys; operators have `jobbill` and the
// admin routes. A new route must be given a client method, or a line here.
var outsideTheClients = map[string]string{
	"POST /v1/jobs/{id}/redrive":                         "admin: `jobbill job redrive`",
	"POST /v1/accounts/{id}/grants":                      "admin: `jobbill account grant`",
	"GET /v1/revenue":                                    "admin, for finance: `jobbill revenue`",
	"POST /v1/accounts/{id}/grants/{key}/settle":         "admin, for the payment code: `jobbill account settle-grant`",
	"GET /v1/accounts/{id}/topup-rule":                   "an account's set-up: `jobbill account topup-rule show` or raw HTTP",
	"PUT /v1/accounts/{id}/topup-rule":                   "admin: `jobbill account topup-rule set`",
	"DELETE /v1/accounts/{id}/topup-rule":                "admin: `jobbill account topup-rule remove`",
	"PUT /v1/prices/{kind}":                              "admin: `jobbill price set`",
	"POST /v1/keys":                                      "admin: `jobbill key create`",
	"GET /v1/keys":                                       "admin: `jobbill key list`",
	"DELETE /v1/keys/{id}":                               "admin: `jobbill key revoke`",
	"PUT /v1/accounts/{id}/low-balance-threshold":        "an account's set-up, once: `jobbill webhook threshold` or raw HTTP",
	"POST /v1/accounts/{id}/webhooks":                    "an account's set-up, once: `jobbill webhook create` or raw HTTP",
	"GET /v1/accounts/{id}/webhooks":                     "an account's set-up: `jobbill webhook list` or raw HTTP",
	"GET /v1/accounts/{id}/webhooks/{endpoint}":          "an account's set-up: raw HTTP",
	"DELETE /v1/accounts/{id}/webhooks/{endpoint}":       "an account's set-up: `jobbill webhook delete` or raw HTTP",
	"POST /v1/accounts/{id}/webhooks/{endpoint}/rotate":  "an account's set-up: raw HTTP",
	"GET /v1/accounts/{id}/webhooks/{endpoint}/attempts": "support, when a receiver misses events: `jobbill webhook attempts` or raw HTTP",
	"POST /v1/accounts/{id}/webhooks/{endpoint}/replay":  "support, when a receiver missed events: `jobbill webhook replay` or raw HTTP",
	"GET /healthz":                                       "the orchestrator's, without a key",
	"GET /readyz":                                        "the orchestrator's, without a key",
}

// callsOf drives each exported method of *apiclient.Client once, by name: every one that sends a
// request is here, so that the routes the Go client calls are known without reading its code.
var callsOf = map[string]func(ctx context.Context, c *apiclient.Client){
	"Track":  func(context.Context, *apiclient.Client) {}, // keeps the body; sends nothing
	"Run":    func(ctx context.Context, c *apiclient.Client) { _, _ = c.Run(ctx, c.Track(probeJob)) },
	"Submit": func(ctx context.Context, c *apiclient.Client) { _, _ = c.Submit(ctx, c.Track(probeJob)) },
	"Poll":   func(ctx context.Context, c *apiclient.Client) { _, _ = c.Poll(ctx, c.Track(probeJob)) },
	"Status": func(ctx context.Context, c *apiclient.Client) { _, _ = c.Status(ctx, "j-1") },
	"DeleteJob": func(ctx context.Context, c *apiclient.Client) {
		_, _ = c.DeleteJob(ctx, "j-1")
	},
	"ReportResult": func(ctx context.Context, c *apiclient.Client) {
		_, _ = c.ReportResult(ctx, "j-1", apitype.ResultRequest{Attempt: 1, OutputRef: "s3://out"})
	},
	"ListJobs": func(ctx context.Context, c *apiclient.Client) { _, _ = c.ListJobs(ctx, apiclient.ListOptions{}) },
	"Balance":  func(ctx context.Context, c *apiclient.Client) { _, _ = c.Balance(ctx, "acme") },
	"Ledger": func(ctx context.Context, c *apiclient.Client) {
		_, _ = c.Ledger(ctx, "acme", apiclient.LedgerOptions{})
	},
	"Blocks": func(ctx context.Context, c *apiclient.Client) { _, _ = c.Blocks(ctx, "acme") },
	"Statement": func(ctx context.Context, c *apiclient.Client) {
		_, _ = c.Statement(ctx, "acme", time.Unix(0, 0), time.Unix(3600, 0))
	},
	"Prices":       func(ctx context.Context, c *apiclient.Client) { _, _ = c.Prices(ctx) },
	"PriceHistory": func(ctx context.Context, c *apiclient.Client) { _, _ = c.PriceHistory(ctx, "render-4k") },
}

var probeJob = apitype.SubmitRequest{JobID: "j-1", AccountID: "acme", Kind: "render-4k", InputRef: "s3://in"}

// TestClientsCallEveryRoute keeps the route table, the Go client and the TypeScript client
// together (the idempotent-doors rule: every door documented, and each client speaking only the
// API's own routes): every route of api/openapi.yaml — which TestOpenAPIMatchesRoutes holds to the
// API's route table — is called by a method of the Go client or is listed, with its reason, as left
// to raw HTTP; the Go client calls no route the document lacks; and the TypeScript client calls
// exactly the routes the Go client calls. The bodies both clients send and decode are package
// apitype's, which TestOpenAPISchemasMatchBodies holds to the document.
func TestClientsCallEveryRoute(t *testing.T) {
	routes := documentedRoutes(t)
	goCalls := goClientRoutes(t, routes)
	for _, route := range routes {
		_, outside := outsideTheClients[route]
		switch {
		case slices.Contains(goCalls, route) && outside:
			t.Errorf("%s is called by the Go client and listed as outside the clients: drop it from outsideTheClients", route)
		case !slices.Contains(goCalls, route) && !outside:
			t.Errorf("%s has no Go client method: add one (and to the TypeScript client), or list it in outsideTheClients with why", route)
		}
	}
	for route := range outsideTheClients {
		require.Contains(t, routes, route, "outsideTheClients names a route openapi.yaml lacks")
	}
	require.ElementsMatch(t, goCalls, typeScriptRoutes(t, routes),
		"the TypeScript client (clients/typescript/src/client.ts) calls the routes the Go client calls")
}

// documentedRoutes are the routes of api/openapi.yaml, as "METHOD /path/{param}".
func documentedRoutes(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../api/openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	var routes []string
	for path, item := range doc.Paths {
		for method := range item {
			if method != "parameters" {
				routes = append(routes, strings.ToUpper(method)+" "+path)
			}
		}
	}
	return routes
}

// goClientRoutes drives every exported method of the Go client against a server that serves
// the documented routes, and answers the routes the requests matched. Each route answers 400, so
// every call ends at its first request.
func goClientRoutes(t *testing.T, routes []string) []string {
	t.Helper()
	var mu sync.Mutex
	called := map[string]bool{}
	mux := http.NewServeMux()
	for _, route := range routes {
		mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			called[r.Pattern] = true
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"code":"invalid_input","message":"probe"}`))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the Go client calls %s %s, which openapi.yaml does not document", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	clientType := reflect.TypeOf(&apiclient.Client{})
	var methods []string
	for i := range clientType.NumMethod() {
		methods = append(methods, clientType.Method(i).Name)
	}
	require.ElementsMatch(t, methods, slices.Collect(maps.Keys(callsOf)),
		"callsOf drives every exported method of the Go client")
	for _, call := range callsOf {
		call(context.Background(), &apiclient.Client{BaseURL: srv.URL, Key: "k", AccountID: "acme", SubmitAttempts: 1})
	}
	return slices.Collect(maps.Keys(called))
}

// tsCall is a request of the TypeScript client: this.send('GET', `/v1/jobs/${…}` …) or
// this.call<T>('GET', '/v1/prices' …).
var tsCall = regexp.MustCompile("this\\.(?:send|call)(?:<[^(]*>)?\\(\\s*'([A-Z]+)',\\s*[`']([^`']+)[`']")

// typeScriptRoutes are the documented routes the TypeScript client's requests match; a request
// that matches none fails the test.
func typeScriptRoutes(t *testing.T, routes []string) []string {
	t.Helper()
	src, err := os.ReadFile("../clients/typescript/src/client.ts")
	require.NoError(t, err)
	var found []string
	for _, m := range tsCall.FindAllStringSubmatch(string(src), -1) {
		path := regexp.MustCompile(`\$\{[^}]*\}`).ReplaceAllString(m[2], "x")
		matched := ""
		for _, route := range routes {
			method, pattern, _ := strings.Cut(route, " ")
			re := "^" + regexp.MustCompile(`\\\{[a-z]+\\\}`).ReplaceAllString(regexp.QuoteMeta(pattern), "[^/]+") + "$"
			if method == m[1] && regexp.MustCompile(re).MatchString(path) {
				matched = route
			}
		}
		if matched == "" {
			t.Errorf("the TypeScript client calls %s %s, which openapi.yaml does not document", m[1], m[2])
			continue
		}
		if !slices.Contains(found, matched) {
			found = append(found, matched)
		}
	}
	require.NotEmpty(t, found, "the TypeScript client's requests are found in client.ts")
	return found
}

// typeScriptBodies are the interfaces of the TypeScript client's types.ts by the wire type each
// is; ListOptions is a query, not a body.
var typeScriptBodies = map[string]any{
	"JobRequest": apitype.SubmitRequest{}, "JobStatus": apitype.Status{}, "ResultReport": apitype.ResultRequest{},
	"ResultAnswer": apitype.ResultReport{}, "JobPage": apitype.JobList{}, "Account": apitype.Account{},
	"LedgerEntry": apitype.LedgerEntry{}, "LedgerPage": apitype.LedgerPage{}, "Price": apitype.Price{},
	"ListOptions": nil, "Block": apitype.Block{}, "BlockList": apitype.BlockList{}, "Statement": apitype.Statement{},
	"StatementLine": apitype.StatementLine{},
}

// TestTypeScriptBodiesAreTheWireTypes holds the TypeScript client's bodies to the wire types, as
// far as it declares them (trust: a TypeScript program reads a job's money as the API writes it,
// and is never promised a field the API does not send): every property of each interface in
// clients/typescript/src/types.ts is a JSON field of its apitype type, and every interface there
// is listed, so that a new one is held too.
func TestTypeScriptBodiesAreTheWireTypes(t *testing.T) {
	src, err := os.ReadFile("../clients/typescript/src/types.ts")
	require.NoError(t, err)
	interfaces := typeScriptInterfaces(string(src))
	require.ElementsMatch(t, slices.Collect(maps.Keys(interfaces)), slices.Collect(maps.Keys(typeScriptBodies)),
		"every interface of types.ts is listed in typeScriptBodies")
	for name, body := range typeScriptBodies {
		if body == nil {
			continue
		}
		wire := jsonNames(reflect.TypeOf(body))
		for _, property := range interfaces[name] {
			require.Contains(t, wire, property, "%s.%s in types.ts is not a field of apitype.%s", name, property, reflect.TypeOf(body).Name())
		}
	}
}

// typeScriptInterfaces are the exported interfaces of a TypeScript source, each with its
// properties' names.
func typeScriptInterfaces(src string) map[string][]string {
	out := map[string][]string{}
	property := regexp.MustCompile(`^\s+(\w+)\??:`)
	name := ""
	for _, line := range strings.Split(src, "\n") {
		switch {
		case strings.HasPrefix(line, "export interface "):
			name = strings.Fields(line)[2]
			out[name] = nil
		case strings.HasPrefix(line, "}"):
			name = ""
		case name != "":
			if m := property.FindStringSubmatch(line); m != nil {
				out[name] = append(out[name], m[1])
			}
		}
	}
	return out
}

// jsonNames are the JSON names of a struct's fields, those of embedded structs included.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "":
			names = append(names, jsonNames(f.Type)...)
		case name != "" && name != "-":
			names = append(names, name)
		}
	}
	return names
}

// TestClientKeepsNoBodiesOfItsOwn keeps the Go client's bodies in package apitype, where
// TestOpenAPISchemasMatchBodies holds them to api/openapi.yaml (the idempotent-doors rule: the
// client speaks the documented API, and nothing else): no struct of the client's own code carries
// JSON names but Tracked, the client's saved state of a submission, which is no body of the API.
func TestClientKeepsNoBodiesOfItsOwn(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var tagged []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := spec.Type.(*ast.StructType); ok {
				for _, f := range st.Fields.List {
					if f.Tag != nil && strings.Contains(f.Tag.Value, "json:") {
						tagged = append(tagged, spec.Name.Name)
						break
					}
				}
			}
			return true
		})
	}
	require.Equal(t, []string{"Tracked"}, tagged, "the client's bodies are apitype's; a struct with JSON names is one of its own")
}
