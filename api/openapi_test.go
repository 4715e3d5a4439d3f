package api

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
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
