package api

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsNameEveryRoute keeps docs/api.md's table of routes whole (the idempotent-doors rule:
// every door documented, with what it answers): each route of the API's route table is named in its
// section "Routes and status codes" as `METHOD /path` (its query string may follow), and the
// section names no route the route table lacks.
func TestDocsNameEveryRoute(t *testing.T) {
	raw, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	_, page, found := strings.Cut(string(raw), "\n## Routes and status codes\n")
	require.True(t, found, "docs/api.md has a section \"Routes and status codes\"")
	page, _, _ = strings.Cut(page, "\n## ")
	routed := map[string]bool{}
	for _, rt := range New(Options{}).routes {
		name := rt.method + " " + rt.path
		routed[name] = true
		require.True(t, strings.Contains(page, "`"+name+"`") || strings.Contains(page, "`"+name+"?"),
			"docs/api.md's routes and status codes do not name %s: add it to the table", name)
	}
	for _, named := range routesNamed(page) {
		require.True(t, routed[named], "docs/api.md's routes and status codes name %s, which the API does not route", named)
	}
}

// routesNamed are the routes a page names in code spans, `METHOD /path` or `METHOD /path?query`.
func routesNamed(page string) []string {
	var named []string
	for i, span := range strings.Split(page, "`") {
		if i%2 == 0 {
			continue // outside a code span
		}
		method, path, ok := strings.Cut(span, " ")
		if !ok || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " ") ||
			!(method == "GET" || method == "POST" || method == "PUT" || method == "DELETE" || method == "PATCH") {
			continue
		}
		path, _, _ = strings.Cut(path, "?")
		named = append(named, method+" "+path)
	}
	return named
}
