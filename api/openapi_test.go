package api

import (
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

// TestOpenAPIMatchesRoutes keeps openapi.yaml true (money rule 8's doors are all documented):
// every path and method in the document is routed, every route is documented, and each
// operation lists exactly the status codes its handler can answer. The end-to-end tests check
// the other half: no handler answers a status its route does not declare.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	raw, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."), "an OpenAPI 3 document")

	documented := map[string][]int{}
	for path, item := range doc.Paths {
		for method, op := range item {
			if method == "parameters" {
				continue
			}
			opMap, _ := op.(map[string]any)
			responses, _ := opMap["responses"].(map[string]any)
			var codes []int
			for code := range responses {
				n, err := strconv.Atoi(code)
				require.NoError(t, err, "%s %s: response %q", method, path, code)
				codes = append(codes, n)
			}
			sort.Ints(codes)
			documented[strings.ToUpper(method)+" "+path] = codes
		}
	}
	routed := map[string][]int{}
	s := New(Options{})
	for _, rt := range s.routes {
		codes := append([]int(nil), rt.statuses...)
		if rt.auth != public {
			codes = append(codes, commonStatuses...)
		}
		sort.Ints(codes)
		routed[rt.method+" "+rt.path] = codes
	}
	require.Equal(t, routed, documented)
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
	for schema, body := range map[string]any{
		"SubmitRequest": SubmitRequest{}, "ResultRequest": ResultRequest{}, "PriceRequest": PriceRequest{},
		"Status": jobs.Status{}, "Submission": jobs.Submission{}, "ResultReport": jobs.ResultReport{},
		"Price": ledgerdb.Price{}, "PriceList": PriceList{}, "PriceHistory": PriceHistory{}, "PriceSet": PriceSet{},
		"Grant": Grant{}, "Account": Account{}, "LedgerPage": LedgerPage{}, "Error": Error{}, "JobList": JobList{},
	} {
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

// jsonFields are the JSON names of a struct's fields, sorted.
func jsonFields(t reflect.Type) []string {
	names := []string{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
