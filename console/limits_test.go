package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/console"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// slow is a rate that gives no token back while a test runs: a bucket holds its burst, and then
// nothing.
func slow(burst int) config.RateLimit { return config.RateLimit{PerSecond: 0.0001, Burst: burst} }

// TestRateLimitIsPerSession checks the console's own rate limit, which protects the ledger from a
// browser that asks too fast without refusing anyone else: each signed-in browser has a bucket of
// its own — two people behind one proxy (one address, here) do not share one — a page view counts
// once (its stylesheet and icon are not counted), and the API's limit, which counts requests
// without a key by address, does not reach the console. A browser that has spent its bucket gets
// the console's own page, 429, in HTML under the console's headers, saying in words when to come
// back and sending Retry-After; nothing is done, and the other browser's pages are served still.
func TestRateLimitIsPerSession(t *testing.T) {
	const views = 6
	s := serveWith(t, func(o *api.Options, c *console.Options) {
		// The API's own limit, far below what two people's pages need.
		o.Config.RateLimit = slow(3)
		c.SessionRate = slow(views)
		c.AddressRate = slow(10)
	})
	acct := ledgertest.Account(t, s.Store, 1000)
	a, _ := s.signedIn(t, apikeys.ScopeCustomer, acct)
	b, secondKey := s.signedIn(t, apikeys.ScopeCustomerRead, acct)

	for i := range views {
		page := get(t, a, s.URL+"/console/accounts/"+acct)
		require.Equal(t, http.StatusOK, page.code, "page view %d: %s", i+1, page.body)
		for _, asset := range []string{"/console/static/console.css", "/console/static/favicon.svg"} {
			require.Equal(t, http.StatusOK, get(t, a, s.URL+asset).code, "the page's %s is not counted", asset)
		}
	}
	refused := get(t, a, s.URL+"/console/accounts/"+acct)
	requireTooMany(t, refused)
	require.Contains(t, refused.body, "You opened pages faster than the console serves one person")

	require.Equal(t, http.StatusOK, get(t, b, s.URL+"/console/accounts/"+acct).code, "another browser at the same address has its own bucket")
	// A form is refused before it does anything, and its browser is told so.
	form := get(t, b, s.URL+"/console/accounts/"+acct)
	for range views {
		get(t, b, s.URL+"/console/accounts/"+acct)
	}
	out := post(t, b, s.URL+"/console/sign-out", url.Values{"csrf": {csrf(t, form)}})
	requireTooMany(t, out)
	require.Contains(t, out.body, "Nothing was done")
	require.Equal(t, 1, openSessions(t, secondKey.ID), "the refused sign-out ended nothing")
}

// TestRateLimitBeforeSignIn checks the limit of requests that carry no session — the sign-in
// form and its posts — and of those whose cookie or key opens nothing: they are counted against
// the remote address (there is nothing else to count them by), and a cookie that opens nothing is
// removed, so a browser whose session ended counts against its address once. The answer past the
// limit is the console's own 429 page.
func TestRateLimitBeforeSignIn(t *testing.T) {
	s := serveWith(t, func(_ *api.Options, c *console.Options) {
		c.SessionRate = slow(100)
		c.AddressRate = slow(4)
	})
	c := browser(t)
	form := get(t, c, s.URL+"/console/sign-in")
	require.Equal(t, http.StatusOK, form.code)
	wrong := post(t, c, s.URL+"/console/sign-in", url.Values{"csrf": {csrf(t, form)}, "key": {"jb_cust_notakey"}})
	require.Equal(t, http.StatusUnauthorized, wrong.code)

	ended := browser(t)
	ended.Jar.SetCookies(mustURL(t, s.URL+"/console/"), []*http.Cookie{{Name: "jobbill_session", Value: "no-such-session", Path: "/console/"}})
	gone := get(t, ended, s.URL+"/console/operator/")
	require.Equal(t, http.StatusSeeOther, gone.code, "a cookie that opens nothing sends its browser to sign in")
	require.Contains(t, gone.resp.Header.Get("Set-Cookie"), "jobbill_session=;", "and is removed")

	require.Equal(t, http.StatusOK, get(t, c, s.URL+"/console/sign-in").code, "the fourth request of the address")
	refused := get(t, c, s.URL+"/console/sign-in")
	requireTooMany(t, refused)
	require.Contains(t, refused.body, "Too many requests without a signed-in session came from your network")
}

// requireTooMany checks the console's answer to a browser past its limit: 429, an HTML page under
// the console's headers with a Retry-After of whole seconds, and no JSON.
func requireTooMany(t *testing.T, p page) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, p.code, p.body)
	require.Equal(t, "text/html; charset=utf-8", p.resp.Header.Get("Content-Type"))
	require.Equal(t, "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		p.resp.Header.Get("Content-Security-Policy"))
	require.Equal(t, "DENY", p.resp.Header.Get("X-Frame-Options"))
	require.Equal(t, "no-store", p.resp.Header.Get("Cache-Control"))
	retry, err := strconv.Atoi(p.resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After is whole seconds")
	require.Positive(t, retry)
	require.Contains(t, p.body, "<h1>Too many requests</h1>")
	require.Contains(t, p.body, "try again in ")
	require.NotContains(t, p.body, `"code"`)
}
