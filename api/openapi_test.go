package api

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/ledgerdb"
)

// TestOpenAPIMatchesRoutes keeps openapi.yaml true (the idempotent-doors rule's doors are all
// documented, and who may open each): every path and method in the document is routed, every route
// is documented, each operation lists exactly the status codes its handler can answer, and exactly
// the key scopes the route table lets call it (x-scopes) — or, for a route that takes no key,
// says so (security: []) and lists none. The end-to-end tests check the other half: no handler
// answers a status its route does not declare, and each scope is let in or refused as declared.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	raw, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."), "an OpenAPI 3 document")

	documented, documentedScopes := map[string][]int{}, map[string][]string{}
	for path, item := range doc.Paths {
		for method, op := range item {
			if method == "parameters" {
				continue
			}
			opMap, _ := op.(map[string]any)
			name := strings.ToUpper(method) + " " + path
			scopes := []string{}
			list, hasScopes := opMap["x-scopes"].([]any)
			for _, s := range list {
				scopes = append(scopes, fmt.Sprint(s))
			}
			sort.Strings(scopes)
			security, overridden := opMap["security"].([]any)
			switch {
			case overridden && len(security) == 0:
				require.False(t, hasScopes, "%s takes no key (security: []) but lists x-scopes", name)
				scopes = nil
			case overridden:
				t.Errorf("%s: the document's one security scheme applies to every keyed route; say who may call it in x-scopes", name)
			default:
				require.True(t, hasScopes && len(scopes) > 0, "%s takes a key: list the scopes that may call it in x-scopes", name)
			}
			documentedScopes[name] = scopes
			responses, _ := opMap["responses"].(map[string]any)
			var codes []int
			for code := range responses {
				n, err := strconv.Atoi(code)
				require.NoError(t, err, "%s %s: response %q", method, path, code)
				codes = append(codes, n)
			}
			sort.Ints(codes)
			documented[name] = codes
		}
	}
	routed, routedScopes := map[string][]int{}, map[string][]string{}
	s := New(Options{})
	for _, rt := range s.routes {
		codes := append([]int(nil), rt.statuses...)
		var scopes []string
		if !rt.access.public {
			codes = append(codes, commonStatuses...)
			for _, scope := range rt.access.scopes {
				scopes = append(scopes, string(scope))
			}
			sort.Strings(scopes)
		}
		sort.Ints(codes)
		routed[rt.method+" "+rt.path] = codes
		routedScopes[rt.method+" "+rt.path] = scopes
	}
	require.Equal(t, routed, documented)
	require.Equal(t, routedScopes, documentedScopes)
}

// TestOpenAPISchemasMatchBodies keeps the document's schemas equal to what travels, field for
// field (the price-list rule as documented): the submission names a kind and has no amount property
// under any name, a result carries units_used and no amount, and a job's status documents its
// price, hold, usage and settlement (held, charged, released, units_used).
//
// The bodies are package apitype's types, which the server (package api) reads and answers and
// the Go client (package apiclient) sends and decodes: one definition, so this test holds both
// the server's and the Go client's bodies to the document. It walks each type whole: every field
// of every body, and of the bodies inside it (a page's entries, a submission's status), must be
// a property of its schema — inline or by $ref — of the same JSON type, and every property a
// field; and every exported type of apitype must be a documented body, so that a new one cannot
// be left out of the document.
func TestOpenAPISchemasMatchBodies(t *testing.T) {
	schemas := openAPISchemas(t)
	for name, body := range documentedBodies {
		typ := reflect.TypeOf(body)
		require.Equal(t, name, typ.Name(), "a body's schema is named as its type")
		schema, ok := schemas[name].(map[string]any)
		require.True(t, ok, "openapi.yaml has no schema %s", name)
		checkSchema(t, name, typ, schema, schemas)
	}
	require.ElementsMatch(t, exportedTypes(t, "../apitype"), slices.Collect(maps.Keys(documentedBodies)),
		"every type of package apitype is a body of the document, and documentedBodies lists them all")

	props := func(name string) map[string]any { return schemas[name].(map[string]any)["properties"].(map[string]any) }
	require.Contains(t, schemas["SubmitRequest"].(map[string]any)["required"], "kind")
	for _, amount := range []string{"cost", "amount", "price", "unit_price", "credits"} {
		require.NotContains(t, props("SubmitRequest"), amount)
		require.NotContains(t, props("ResultRequest"), amount)
	}
}

// failRecorder is a require.TestingT that only records a failure.
type failRecorder struct{ failed bool }

func (r *failRecorder) Errorf(string, ...any) { r.failed = true }
func (r *failRecorder) FailNow()              { r.failed = true; runtime.Goexit() }

// TestOpenAPISchemaCheckFails checks that checkSchema, which the test above relies on, fails a
// body whose field the schema lacks, a schema whose property the body lacks, a field whose JSON
// type differs from its property's, and a list whose element differs from its items.
func TestOpenAPISchemaCheckFails(t *testing.T) {
	type entry struct {
		ID int64 `json:"id"`
	}
	type body struct {
		Amount  int64   `json:"amount"`
		Memo    string  `json:"memo,omitempty"`
		Entries []entry `json:"entries"`
	}
	typ := func(name string) map[string]any { return map[string]any{"type": name} }
	entries := map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/Entry"}}
	good := map[string]any{"properties": map[string]any{"amount": typ("integer"), "memo": typ("string"), "entries": entries}}
	check := func(schema map[string]any, entrySchema map[string]any) bool {
		r := &failRecorder{}
		done := make(chan struct{})
		// A failure ends the check's goroutine (FailNow), as it ends a test.
		go func() {
			defer close(done)
			checkSchema(r, "body", reflect.TypeOf(body{}), schema, map[string]any{"Entry": entrySchema})
		}()
		<-done
		return r.failed
	}
	entryOK := map[string]any{"type": "object", "properties": map[string]any{"id": typ("integer")}}
	require.False(t, check(good, entryOK), "the matching schema passes")
	for name, bad := range map[string]map[string]any{
		"a field the schema lacks":   {"properties": map[string]any{"amount": typ("integer"), "entries": entries}},
		"a property the body lacks":  {"properties": map[string]any{"amount": typ("integer"), "memo": typ("string"), "entries": entries, "key": typ("string")}},
		"a property of another type": {"properties": map[string]any{"amount": typ("string"), "memo": typ("string"), "entries": entries}},
	} {
		require.True(t, check(bad, entryOK), name)
	}
	require.True(t, check(good, map[string]any{"type": "object", "properties": map[string]any{"id": typ("string")}}),
		"a list's element of another type")
}

// openAPISchemas are the document's components.schemas, as YAML maps.
func openAPISchemas(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	return doc.Components.Schemas
}

// checkSchema holds the Go type typ, at where in a body, to schema: an object's properties are
// exactly its fields' JSON names, each of the same JSON type, and so on down every field and
// list; a $ref is followed into schemas.
func checkSchema(t require.TestingT, where string, typ reflect.Type, schema map[string]any, schemas map[string]any) {
	if ref, ok := schema["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		referred, ok := schemas[name].(map[string]any)
		require.True(t, ok, "%s refers to %s, which the document lacks", where, ref)
		checkSchema(t, where, typ, referred, schemas)
		return
	}
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := "object"
	switch {
	case typ == reflect.TypeOf(time.Time{}):
		want = "string"
		require.Equal(t, "date-time", schema["format"], "%s is a time: format date-time", where)
	case typ.Kind() == reflect.String:
		want = "string"
	case typ.Kind() == reflect.Bool:
		want = "boolean"
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		want = "integer"
	case typ.Kind() == reflect.Slice:
		want = "array"
		items, ok := schema["items"].(map[string]any)
		require.True(t, ok, "%s is a list: its schema needs items", where)
		checkSchema(t, where+"[]", typ.Elem(), items, schemas)
	}
	if got, ok := schema["type"]; ok || want != "object" {
		require.Equal(t, want, got, "%s is a %s in Go", where, typ)
	}
	if want != "object" {
		return
	}
	properties, _ := schema["properties"].(map[string]any)
	require.Equal(t, jsonFields(typ), slices.Sorted(maps.Keys(properties)), "the properties of %s", where)
	for _, f := range flatFields(typ) {
		property, _ := properties[f.name].(map[string]any)
		checkSchema(t, where+"."+f.name, f.typ, property, schemas)
	}
}

// exportedTypes are the names of the exported types declared in the Go package in dir (its tests
// aside).
func exportedTypes(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		for _, decl := range file.Decls {
			if gen, ok := decl.(*ast.GenDecl); ok && gen.Tok == token.TYPE {
				for _, spec := range gen.Specs {
					if name := spec.(*ast.TypeSpec).Name.Name; ast.IsExported(name) {
						names = append(names, name)
					}
				}
			}
		}
	}
	return names
}

// documentedBodies are the bodies the API reads and answers, and the Go client sends and
// decodes — every type of package apitype — by their schema in openapi.yaml, which is named as
// the type.
var documentedBodies = map[string]any{
	"SubmitRequest": apitype.SubmitRequest{}, "ResultRequest": apitype.ResultRequest{}, "PriceRequest": apitype.PriceRequest{},
	"RedriveRequest": apitype.RedriveRequest{}, "GrantRequest": apitype.GrantRequest{},
	"Status": apitype.Status{}, "Submission": apitype.Submission{}, "ResultReport": apitype.ResultReport{},
	"Price": apitype.Price{}, "PriceList": apitype.PriceList{}, "PriceHistory": apitype.PriceHistory{}, "PriceSet": apitype.PriceSet{},
	"Grant": apitype.Grant{}, "Account": apitype.Account{}, "LedgerPage": apitype.LedgerPage{}, "LedgerEntry": apitype.LedgerEntry{},
	"Error": apitype.Error{}, "JobList": apitype.JobList{},
	"KeyRequest": apitype.KeyRequest{}, "Key": apitype.Key{}, "CreatedKey": apitype.CreatedKey{}, "KeyList": apitype.KeyList{},
	"KeyRevoked":      apitype.KeyRevoked{},
	"EndpointRequest": apitype.EndpointRequest{}, "Endpoint": apitype.Endpoint{}, "EndpointCreated": apitype.EndpointCreated{},
	"EndpointList": apitype.EndpointList{}, "EndpointDeleted": apitype.EndpointDeleted{}, "Attempt": apitype.Attempt{},
	"AttemptLog": apitype.AttemptLog{}, "ReplayRequest": apitype.ReplayRequest{}, "Replayed": apitype.Replayed{},
	"ThresholdRequest": apitype.ThresholdRequest{}, "Threshold": apitype.Threshold{},
	"Block": apitype.Block{}, "BlockList": apitype.BlockList{}, "Statement": apitype.Statement{},
	"StatementLine": apitype.StatementLine{}, "Revenue": apitype.Revenue{}, "Money": apitype.Money{},
	"SettleGrantRequest": apitype.SettleGrantRequest{}, "TopUpRule": apitype.TopUpRule{},
	"TopUpRuleRemoved": apitype.TopUpRuleRemoved{},
}

// TestOpenAPIReasonsAreTheVocabulary keeps the document's reason codes equal to the vocabulary a
// customer reads (trust: a job's reason is always one of the codes the document lists, never
// words from outside).
func TestOpenAPIReasonsAreTheVocabulary(t *testing.T) {
	raw, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas struct {
				Status struct {
					Properties struct {
						Reason struct {
							Enum []ledgerdb.Reason `yaml:"enum"`
						} `yaml:"reason"`
					} `yaml:"properties"`
				} `yaml:"Status"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.Equal(t, ledgerdb.Reasons(), doc.Components.Schemas.Status.Properties.Reason.Enum)
}

// jsonFields are the JSON names of a struct's fields, sorted; an embedded struct without a name
// of its own lends its fields, as encoding/json does.
func jsonFields(t reflect.Type) []string {
	names := []string{}
	for _, f := range flatFields(t) {
		names = append(names, f.name)
	}
	sort.Strings(names)
	return names
}

// jsonField is one field of a body as it travels: its JSON name and its Go type.
type jsonField struct {
	name string
	typ  reflect.Type
}

// flatFields are the fields of a struct that travel, in order, those of an embedded struct
// without a name of its own in its place, as encoding/json writes them.
func flatFields(t reflect.Type) []jsonField {
	var fields []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			fields = append(fields, flatFields(f.Type)...)
		case name != "" && name != "-":
			fields = append(fields, jsonField{name, f.Type})
		}
	}
	return fields
}

// TestOpenAPIEntryKindsAreTheLedgers keeps the document's ledger row kinds equal to the ledger's
// (trust: a customer reading the ledger or a statement is never sent a kind the document does not
// list, such as the expire row that removes what remained of an expired credit block): the kind
// enums of LedgerEntry and StatementLine are ledgerdb.EntryKinds.
func TestOpenAPIEntryKindsAreTheLedgers(t *testing.T) {
	schemas := openAPISchemas(t)
	for _, name := range []string{"LedgerEntry", "StatementLine"} {
		kind := schemas[name].(map[string]any)["properties"].(map[string]any)["kind"].(map[string]any)
		var enum []ledgerdb.EntryKind
		for _, k := range kind["enum"].([]any) {
			enum = append(enum, ledgerdb.EntryKind(fmt.Sprint(k)))
		}
		require.ElementsMatch(t, ledgerdb.EntryKinds(), enum, "%s.kind in openapi.yaml", name)
	}
}
