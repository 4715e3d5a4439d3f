package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestSignInRefusesBadInputWritingNothing checks that a session is opened only for an active key
// a person pasted into the console's own form: an empty key, an unknown one, a runner's, a
// revoked one and a form without its CSRF token are each refused with a clear page, and no
// session row is written for any of them. Neither the key nor the session's token ever appears in
// a URL, a cookie or a log line.
func TestSignInRefusesBadInputWritingNothing(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	s := serveLogged(t, zap.New(core))
	acct := ledgertest.Account(t, s.Store, 100)
	runner, runnerKey := s.key(t, apikeys.ScopeRunner, "")
	customer, customerKey := s.key(t, apikeys.ScopeCustomer, acct)
	revoked, revokedKey := s.key(t, apikeys.ScopeCustomer, acct)
	_, _, err := apikeys.NewStore(s.Store.Pool()).Revoke(context.Background(), revokedKey.ID)
	require.NoError(t, err)

	c := browser(t)
	form := get(t, c, s.URL+"/console/sign-in")
	token := csrf(t, form)
	for _, tc := range []struct {
		name, key string
		code      int
		says      string
	}{
		{"empty", "  ", http.StatusBadRequest, "Paste an API key"},
		{"unknown", "jb_cust_notakey", http.StatusUnauthorized, "That key does not open the console"},
		{"runner", runner, http.StatusForbidden, "A runner key only reports results"},
		{"revoked", revoked, http.StatusUnauthorized, "That key does not open the console"},
	} {
		answer := post(t, c, s.URL+"/console/sign-in", url.Values{"csrf": {token}, "key": {tc.key}})
		require.Equal(t, tc.code, answer.code, tc.name)
		require.Contains(t, answer.body, tc.says, tc.name)
		// Words for whoever holds a key — a customer, most often — not Markdown, and not the
		// operator's configuration.
		problem := regexp.MustCompile(`<p class="problem" role="alert">([^<]*)</p>`).FindStringSubmatch(answer.body)
		require.NotNil(t, problem, tc.name)
		for _, word := range []string{"`", "bootstrap", "configuration", "jobbill key"} {
			require.NotContains(t, problem[1], word, tc.name)
		}
		token = csrf(t, answer) // each answer gives the form a fresh token
	}
	forged := post(t, browser(t), s.URL+"/console/sign-in", url.Values{"key": {customer}})
	require.Equal(t, http.StatusForbidden, forged.code)
	require.Contains(t, forged.body, "Nothing was done")
	require.Zero(t, sessions(t, runnerKey.ID))
	require.Zero(t, sessions(t, revokedKey.ID))
	require.Zero(t, sessions(t, customerKey.ID))

	s.signIn(t, c, customer)
	require.Equal(t, 1, sessions(t, customerKey.ID))
	require.Equal(t, http.StatusOK, get(t, c, s.URL+"/console/accounts/"+acct).code)
	var session string
	for _, ck := range c.Jar.Cookies(mustURL(t, s.URL+"/console/")) {
		require.NotContains(t, ck.Value, customer, "the session cookie is not the key")
		if ck.Name == "jobbill_session" {
			session = ck.Value
		}
	}
	require.NotEmpty(t, session)
	require.NotZero(t, logs.FilterMessage("console page").Len(), "the console logs its pages")
	for _, entry := range logs.All() {
		line := entry.Message + fmt.Sprint(entry.ContextMap())
		for _, secret := range []string{customer, runner, revoked, session} {
			require.NotContains(t, line, secret, "a log line holds a key or a session's token")
		}
	}
}

// TestSessionCookieAndHeaders checks how a session is kept: an HttpOnly, SameSite=Strict cookie
// on the console's path over plain HTTP, and behind TLS a Secure one named with the __Host- prefix
// (so no other host of the domain, nor a plain-HTTP page, can set or shadow it); and every page
// under a strict Content-Security-Policy that allows no script.
func TestSessionCookieAndHeaders(t *testing.T) {
	s := serve(t)
	acct := ledgertest.Account(t, s.Store, 100)
	secret, _ := s.key(t, apikeys.ScopeCustomerRead, acct)
	c := browser(t)
	form := get(t, c, s.URL+"/console/sign-in")
	require.Contains(t, form.resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.NotContains(t, form.resp.Header.Get("Content-Security-Policy"), "script-src")
	require.Regexp(t, `^jobbill_sign_in=[^;]+; Path=/console/; HttpOnly; SameSite=Strict$`, form.resp.Header.Get("Set-Cookie"))
	s.signIn(t, c, secret)
	require.Equal(t, http.StatusOK, get(t, c, s.URL+"/console/accounts/"+acct).code, "plain HTTP keeps the session in its plain cookie")

	// Behind TLS (a proxy that says so), with the cookies a browser keeps and sends back by hand:
	// a cookie jar sends no Secure cookie over the test's plain HTTP.
	tls := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path, cookies string, form url.Values) page {
		req, err := http.NewRequest(method, s.URL+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("Cookie", cookies)
		resp, err := tls.Do(req)
		require.NoError(t, err)
		return read(t, resp)
	}
	signInForm := do(http.MethodGet, "/console/sign-in", "", nil)
	set := signInForm.resp.Header.Get("Set-Cookie")
	require.Regexp(t, `^__Host-jobbill_sign_in=[^;]+; Path=/; HttpOnly; Secure; SameSite=Strict$`, set)
	answer := do(http.MethodPost, "/console/sign-in", strings.SplitN(set, ";", 2)[0], url.Values{"csrf": {csrf(t, signInForm)}, "key": {secret}})
	require.Equal(t, http.StatusSeeOther, answer.code, answer.body)
	set = strings.Join(answer.resp.Header.Values("Set-Cookie"), "\n")
	require.Regexp(t, `(?m)^__Host-jobbill_session=[^;]+; Path=/; Expires=[^;]+; HttpOnly; Secure; SameSite=Strict$`, set)
	require.NotContains(t, set, "\njobbill_session=", "no unprefixed session cookie behind TLS")
	session := regexp.MustCompile(`(?m)^(__Host-jobbill_session=[^;]+)`).FindStringSubmatch(set)[1]

	home := do(http.MethodGet, "/console/accounts/"+acct, session, nil)
	require.Equal(t, http.StatusOK, home.code)
	require.Equal(t, "no-store", home.resp.Header.Get("Cache-Control"))
	require.Contains(t, home.resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Equal(t, http.StatusSeeOther, do(http.MethodGet, "/console/accounts/"+acct, strings.TrimPrefix(session, "__Host-"), nil).code,
		"behind TLS the unprefixed cookie opens nothing")
}

// TestSignInEndsTheOldSession checks that signing in over a session ends it: the browser holds
// one session, and the token it held before opens nothing any more (anyone who copied it, or a
// key that should no longer be in use, keeps no way in).
func TestSignInEndsTheOldSession(t *testing.T) {
	s := serve(t)
	acct := ledgertest.Account(t, s.Store, 100)
	first, firstKey := s.key(t, apikeys.ScopeCustomerRead, acct)
	second, secondKey := s.key(t, apikeys.ScopeCustomer, acct)
	holder := browser(t)
	s.signIn(t, holder, first)
	old := sessionToken(t, holder, s.URL)
	// A browser that holds that session posts the sign-in form (loaded before it was signed in:
	// the form's page sends a signed-in browser home).
	c := browser(t)
	form := get(t, c, s.URL+"/console/sign-in")
	c.Jar.SetCookies(mustURL(t, s.URL+"/console/"), []*http.Cookie{{Name: "jobbill_session", Value: old, Path: "/console/"}})
	answer := post(t, c, s.URL+"/console/sign-in", url.Values{"csrf": {csrf(t, form)}, "key": {second}})
	require.Equal(t, http.StatusSeeOther, answer.code, answer.body)
	require.NotEqual(t, old, sessionToken(t, c, s.URL))
	require.Zero(t, openSessions(t, firstKey.ID), "the session signed in over ended")
	require.Equal(t, 1, openSessions(t, secondKey.ID))
	require.Equal(t, http.StatusSeeOther, get(t, holder, s.URL+"/console/accounts/"+acct).code, "the old token opens nothing")
	require.Equal(t, http.StatusOK, get(t, c, s.URL+"/console/accounts/"+acct).code)
}

// openSessions counts the console's sessions of a key not signed out, as the owner sees them.
func openSessions(t *testing.T, keyID string) int {
	t.Helper()
	var n int
	require.NoError(t, ledgertest.OwnerPool(t).QueryRow(context.Background(),
		`SELECT count(*) FROM console_sessions WHERE key_id = $1 AND ended_at IS NULL`, keyID).Scan(&n))
	return n
}

// sessionToken is the session cookie's token the browser holds.
func sessionToken(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	for _, ck := range c.Jar.Cookies(mustURL(t, base+"/console/")) {
		if ck.Name == "jobbill_session" {
			return ck.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}

// TestOtherTenantIsNotFound checks tenant isolation: a customer's session gets another account's
// page, its job's page, its jobs and its statement exactly as it gets a page that does not exist
// (the same status and the same bytes), so it learns nothing of which accounts or jobs exist.
func TestOtherTenantIsNotFound(t *testing.T) {
	s := serve(t)
	mine := ledgertest.Account(t, s.Store, 1000)
	theirs := ledgertest.Account(t, s.Store, 1000)
	their := recovered(t, s.Store, theirs)
	c, _ := s.signedIn(t, apikeys.ScopeCustomer, mine)

	missing := get(t, c, s.URL+"/console/accounts/"+mine+"/jobs/no-such-job")
	require.Equal(t, http.StatusNotFound, missing.code)
	for _, path := range []string{
		"/console/accounts/" + theirs,
		"/console/accounts/" + theirs + "/jobs/" + their.JobID,
		"/console/accounts/" + theirs + "/jobs",
		"/console/accounts/" + theirs + "/statement.csv?from=2020-01-01&to=2030-01-01",
		"/console/accounts/no-such-account",
		"/console/operator/keys",
	} {
		answer := get(t, c, s.URL+path)
		require.Equal(t, http.StatusNotFound, answer.code, path)
		require.Equal(t, missing.body, answer.body, path)
	}
	// Their redrive form, CSRF token and all, is not found either, and changes nothing.
	page := get(t, c, s.URL+"/console/accounts/"+mine)
	dead := deadLetter(t, s.Store, theirs)
	answer := post(t, c, s.URL+"/console/accounts/"+theirs+"/jobs/"+dead.JobID+"/redrive", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusNotFound, answer.code)
	job, err := s.Store.Job(context.Background(), dead)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, job.State)
}

// TestForgedFormsAreRefused checks CSRF protection: a form posted without the session's token,
// or with another session's, is refused (403) and does nothing — the dead letter is not re-driven,
// the key not revoked, the session not ended.
func TestForgedFormsAreRefused(t *testing.T) {
	s := serve(t)
	acct := ledgertest.Account(t, s.Store, 1000)
	dead := deadLetter(t, s.Store, acct)
	admin, _ := s.key(t, apikeys.ScopeAdmin, "")
	_, victimKey := s.key(t, apikeys.ScopeCustomer, acct)
	c, other := browser(t), browser(t)
	s.signIn(t, c, admin)
	s.signIn(t, other, admin)
	otherToken := csrf(t, get(t, other, s.URL+"/console/operator/"))

	for _, token := range []string{"", "forged", otherToken} {
		form := url.Values{}
		if token != "" {
			form.Set("csrf", token)
		}
		for _, path := range []string{
			"/console/accounts/" + acct + "/jobs/" + dead.JobID + "/redrive",
			"/console/operator/keys/" + victimKey.ID + "/revoke",
			"/console/sign-out",
		} {
			answer := post(t, c, s.URL+path, form)
			require.Equal(t, http.StatusForbidden, answer.code, path)
			require.Contains(t, answer.body, "Nothing was done", path)
		}
	}
	job, err := s.Store.Job(context.Background(), dead)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, job.State)
	keys, err := apikeys.NewStore(s.Store.Pool()).List(context.Background(), acct)
	require.NoError(t, err)
	require.Equal(t, apikeys.StatusActive, keys[0].Status)
	require.Equal(t, http.StatusOK, get(t, c, s.URL+"/console/operator/").code, "the session still stands")
}

// TestSessionEndsWithItsKey checks that a session is only as good as its key: revoking the key
// (here from the operator's keys page, confirmed) ends its sessions at once, and signing out ends
// one for good — its cookie, replayed, opens nothing.
func TestSessionEndsWithItsKey(t *testing.T) {
	s := serve(t)
	acct := ledgertest.Account(t, s.Store, 100)
	cust, customerKey := s.signedIn(t, apikeys.ScopeCustomer, acct)
	op, _ := s.signedIn(t, apikeys.ScopeAdmin, "")
	require.Equal(t, http.StatusOK, get(t, cust, s.URL+"/console/accounts/"+acct).code)

	keys := get(t, op, s.URL+"/console/operator/keys")
	require.Contains(t, keys.body, customerKey.ID)
	answer := post(t, op, s.URL+"/console/operator/keys/"+customerKey.ID+"/revoke", url.Values{"csrf": {csrf(t, keys)}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, answer.code, answer.body)
	gone := get(t, cust, s.URL+"/console/accounts/"+acct)
	require.Equal(t, http.StatusSeeOther, gone.code)
	require.Equal(t, "/console/sign-in", gone.resp.Header.Get("Location"))

	// Sign out; the old cookie, sent again, opens nothing.
	home := get(t, op, s.URL+"/console/operator/")
	cookies := op.Jar.Cookies(mustURL(t, s.URL+"/console/"))
	require.Equal(t, http.StatusSeeOther, post(t, op, s.URL+"/console/sign-out", url.Values{"csrf": {csrf(t, home)}}).code)
	replay := browser(t)
	replay.Jar.SetCookies(mustURL(t, s.URL+"/console/"), cookies)
	require.Equal(t, http.StatusSeeOther, get(t, replay, s.URL+"/console/operator/").code)
}

// TestBadInputAtEveryForm checks that each of the console's forms answers bad input with a clear
// page (400) and writes nothing: the job filters, the statement's dates, the operator's account
// look-up, a redrive with a note the ledger refuses, and a revocation of something that is not a
// key's ID. (A redrive of a job that is not a dead letter is no bad input: the job's page says why
// nothing ran, TestRedriveSaysWhatHappened.)
func TestBadInputAtEveryForm(t *testing.T) {
	s := serve(t)
	acct := ledgertest.Account(t, s.Store, 1000)
	dead := deadLetter(t, s.Store, acct)
	c, _ := s.signedIn(t, apikeys.ScopeAdmin, "")
	token := csrf(t, get(t, c, s.URL+"/console/operator/"))
	base := s.URL + "/console/accounts/" + acct
	filters := "its filters are state, dead lettered, created after, created before and per page"
	euros := strings.Repeat("€", 60)
	for _, tc := range []struct{ path, says string }{
		{base + "/jobs?state=finished", `State "finished" is not a state of a job; the states are submitting, rejected, running,`},
		{base + "/jobs?state=running&state=nope", `State "nope" is not a state of a job`},
		{base + "/jobs?dead_lettered=maybe", `Dead lettered must be yes (true) or no (false).`},
		{base + "/jobs?created_after=yesterday", `Created after "yesterday" is not a time like 2026-01-02T15:04:05Z.`},
		{base + "/jobs?created_before=" + url.QueryEscape(euros), `Created before "` + strings.Repeat("€", 40) + `…" is not a time`},
		{base + "/jobs?created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z", "Created after must be before created before: the range holds no time."},
		{base + "/jobs?limit=100000", `Per page must be a whole number from 1 to 200.`},
		{base + "/jobs?limit=5&limit=6", `Per page is given 2 times; give it once.`},
		{base + "/jobs?cursor=%21%21", `The next page's link is damaged or out of date: open the jobs page again from its first page.`},
		{base + "/jobs?account_id=other", `The jobs page has no filter "account_id"; ` + filters + "."},
		{base + "/jobs?colour=red", `The jobs page has no filter "colour"; ` + filters + "."},
		{base + "/statement.csv?from=2026-01-01", `needs a "to" date`},
		{base + "/statement.csv?from=01/02/2026&to=2026-02-01", `is not a date like 2026-01-02`},
		{base + "/statement.csv?from=" + url.QueryEscape(euros) + "&to=2026-02-01", `The "from" date "` + strings.Repeat("€", 40) + `…" is not a date`},
		{base + "/statement.csv?from=2026-02-01&to=2026-01-01", "its start must be before its end"},
		{s.URL + "/console/operator/account?account_id=", "Type an account ID"},
		{s.URL + "/console/operator/account?account_id=" + url.QueryEscape("no spaces allowed"), "account ID"},
	} {
		answer := get(t, c, tc.path)
		require.Equal(t, http.StatusBadRequest, answer.code, tc.path)
		require.Contains(t, answer.body, htmlEscaped(tc.says), tc.path)
		require.Equal(t, 1, strings.Count(answer.body, "Nothing was changed"), tc.path)
		require.True(t, utf8.ValidString(answer.body), tc.path)
		// The console's words: no API parameter it does not take, no door of the API's.
		for _, word := range []string{"Nothing was written", "account_id=", "GET /v1/jobs", "Query parameter", `\x`} {
			require.NotContains(t, answer.body, word, tc.path)
		}
	}
	before := balance(t, s.Store, acct)
	for _, tc := range []struct {
		path string
		form url.Values
		says string
	}{
		{base + "/jobs/" + dead.JobID + "/redrive", url.Values{"note": {"bad\u202enote"}}, "note"},
		{s.URL + "/console/operator/keys/not-a-key/revoke", url.Values{}, "is not a key"},
	} {
		tc.form.Set("csrf", token)
		answer := post(t, c, tc.path, tc.form)
		require.Equal(t, http.StatusBadRequest, answer.code, tc.path)
		require.Contains(t, answer.body, htmlEscaped(tc.says), tc.path)
		require.Contains(t, answer.body, "Nothing was changed", tc.path)
	}
	job, err := s.Store.Job(context.Background(), dead)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, job.State, "the refused redrive left the dead letter as it was")
	require.Equal(t, before, balance(t, s.Store, acct))
}

// TestStatementAddsUp checks the statement's rule: the opening balance plus the period's rows,
// summed by kind, is the closing balance; a statement up to now closes on the balance; and the
// statement says whether it is final: a period that has not ended is provisional, one that ended
// with no transaction still open that could date a row inside it is final.
func TestStatementAddsUp(t *testing.T) {
	s := serve(t)
	acct := ledgertest.Account(t, s.Store, 1000)
	recovered(t, s.Store, acct)
	deadLetter(t, s.Store, acct)
	c, _ := s.signedIn(t, apikeys.ScopeCustomerRead, acct)
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	for _, from := range []string{"2020-01-01", time.Now().UTC().Format(time.DateOnly)} {
		answer := get(t, c, s.URL+"/console/accounts/"+acct+"/statement.csv?from="+from+"&to="+tomorrow)
		require.Equal(t, http.StatusOK, answer.code, answer.body)
		require.Contains(t, answer.resp.Header.Get("Content-Disposition"), "attachment")
		opening, lines, closing := parseStatement(t, answer.body)
		require.Equal(t, closing, opening+lines, answer.body)
		require.Equal(t, balance(t, s.Store, acct), closing, answer.body)
		require.Contains(t, answer.body, "\nstatus,provisional,,\n", "a period that has not ended")
		require.Contains(t, answer.resp.Header.Get("Content-Disposition"), "-provisional.csv")
	}
	today := time.Now().UTC().Format(time.DateOnly)
	require.Eventually(t, func() bool { // other tests' transactions may be open a moment
		answer := get(t, c, s.URL+"/console/accounts/"+acct+"/statement.csv?from=2020-01-01&to="+today)
		require.Equal(t, http.StatusOK, answer.code, answer.body)
		return strings.Contains(answer.body, "\nstatus,final,,\n")
	}, time.Minute, 20*time.Millisecond, "a period that ended before every open transaction began is final")
}

// parseStatement reads a statement's CSV, whose header is the one its wire format fixes: its
// opening balance, the sum of its lines and its closing balance.
func parseStatement(t *testing.T, body string) (opening, lines, closing int64) {
	t.Helper()
	require.True(t, strings.HasPrefix(body, "line,kind,rows,credits\n"), "the statement's header:\n%s", body)
	_, opening, lines, closing = ledgertest.StatementCSV(t, body)
	return opening, lines, closing
}

func balance(t *testing.T, s *ledgerdb.Store, acct string) int64 {
	t.Helper()
	b, err := s.Balance(context.Background(), acct)
	require.NoError(t, err)
	return b
}

func htmlEscaped(s string) string {
	return strings.NewReplacer(`"`, "&#34;", "&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&#39;").Replace(s)
}

func mustURL(t *testing.T, raw string) *url.URL {
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}
