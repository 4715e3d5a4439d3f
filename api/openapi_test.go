package api

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/webhooks"
)

// TestOpenAPIMatchesRoutes keeps openapi.yaml true (money rule 8's doors are all documented, and
// who may open each): every path and method in the document is routed, every route is
// documented, each operation lists exactly the status codes its handler can answer, and exactly
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

// TestOpenAPISchemasMatchBodies keeps the document's schemas equal to what the API reads and
// answers, field for field (money rule 5 as documented): the submission names a kind and has no
// amount property under any name, a result carries units_used and no amount, and a job's status
// documents its price, hold, usage and settlement (held, charged, released, units_used).
func TestOpenAPISchemasMatchBodies(t *testing.T) {
	raw, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required   []string       `yaml:"required"`
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	for schema, body := range documentedBodies {
		documented := []string{}
		for name := range doc.Components.Schemas[schema].Properties {
			documented = append(documented, name)
		}
		sort.Strings(documented)
		require.Equal(t, jsonFields(reflect.TypeOf(body)), documented, "schema %s", schema)
	}
	submit := doc.Components.Schemas["SubmitRequest"]
	require.Contains(t, submit.Required, "kind")
	for _, amount := range []string{"cost", "amount", "price", "unit_price", "credits"} {
		require.NotContains(t, submit.Properties, amount)
		require.NotContains(t, doc.Components.Schemas["ResultRequest"].Properties, amount)
	}
}

// documentedBodies are the bodies the API reads and answers, by their schema in openapi.yaml.
var documentedBodies = map[string]any{
	"SubmitRequest": SubmitRequest{}, "ResultRequest": ResultRequest{}, "PriceRequest": PriceRequest{},
	"Status": jobs.Status{}, "Submission": jobs.Submission{}, "ResultReport": jobs.ResultReport{},
	"Price": ledgerdb.Price{}, "PriceList": PriceList{}, "PriceHistory": PriceHistory{}, "PriceSet": PriceSet{},
	"Grant": Grant{}, "Account": Account{}, "LedgerPage": LedgerPage{}, "Error": Error{}, "JobList": JobList{},
	"KeyRequest": KeyRequest{}, "Key": apikeys.Key{}, "CreatedKey": apikeys.Created{}, "KeyList": KeyList{}, "KeyRevoked": KeyRevoked{},
	"EndpointRequest": EndpointRequest{}, "Endpoint": webhooks.Endpoint{}, "EndpointCreated": webhooks.Created{},
	"EndpointList": EndpointList{}, "EndpointDeleted": EndpointDeleted{}, "Attempt": webhooks.Attempt{}, "AttemptLog": AttemptLog{},
	"ReplayRequest": ReplayRequest{}, "Replayed": Replayed{}, "ThresholdRequest": ThresholdRequest{}, "Threshold": Threshold{},
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
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			names = append(names, jsonFields(f.Type)...)
		case name != "" && name != "-":
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
