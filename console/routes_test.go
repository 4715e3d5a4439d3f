package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestWrongMethodIsNotAllowed checks the console's answer to a method a path does not take: 405
// with Allow naming the methods it does take, as HTTP asks, on the console's own page under its
// headers — not 404, which says the path does not exist. A path that does not exist is 404 whatever
// the method. The answer depends on the path alone, so it says nothing of any account.
func TestWrongMethodIsNotAllowed(t *testing.T) {
	s := serve(t)
	acct := ledgertest.Account(t, s.Store, 100)
	c, _ := s.signedIn(t, apikeys.ScopeCustomer, acct)
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPost, "/console/accounts/" + acct, "GET, HEAD"},
		{http.MethodPost, "/console/accounts/someone-else", "GET, HEAD"},
		{http.MethodDelete, "/console/accounts/" + acct + "/jobs", "GET, HEAD"},
		{http.MethodGet, "/console/sign-out", "POST"},
		{http.MethodPut, "/console/sign-in", "GET, HEAD, POST"},
		{http.MethodGet, "/console/accounts/" + acct + "/jobs/some-job/redrive", "POST"},
		{http.MethodPost, "/console/static/console.css", "GET, HEAD"},
	} {
		answer := send(t, c, tc.method, s.URL+tc.path)
		require.Equal(t, http.StatusMethodNotAllowed, answer.code, "%s %s", tc.method, tc.path)
		require.Equal(t, tc.allow, answer.resp.Header.Get("Allow"), "%s %s", tc.method, tc.path)
		require.Equal(t, "text/html; charset=utf-8", answer.resp.Header.Get("Content-Type"))
		require.Contains(t, answer.resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
		require.Contains(t, answer.body, "Nothing was done.")
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		missing := send(t, c, method, s.URL+"/console/no-such-page")
		require.Equal(t, http.StatusNotFound, missing.code, method)
		require.Empty(t, missing.resp.Header.Get("Allow"))
	}
}

// TestStaticFilesListNothing checks that the console's static files are served one by one and
// never listed: the directory itself, and a file it does not have, answer the console's not-found
// page.
func TestStaticFilesListNothing(t *testing.T) {
	s := serve(t)
	c := browser(t)
	css := get(t, c, s.URL+"/console/static/console.css")
	require.Equal(t, http.StatusOK, css.code)
	require.True(t, strings.HasPrefix(css.resp.Header.Get("Content-Type"), "text/css"))
	for _, path := range []string{"/console/static/", "/console/static/no-such.css", "/console/static/..%2ftemplates%2flayout.html"} {
		answer := get(t, c, s.URL+path)
		require.Equal(t, http.StatusNotFound, answer.code, path)
		require.NotContains(t, answer.body, `<a href="console.css">`, path)
		require.NotContains(t, answer.body, `<a href="favicon.svg">`, path)
		require.Contains(t, answer.body, "<h1>Not found</h1>", path)
	}
}

// send is a request of any method, with no body.
func send(t *testing.T, c *http.Client, method, u string) page {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	return read(t, resp)
}
