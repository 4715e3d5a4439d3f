package console_test

// The console in a real browser: headless Chromium (the Debian package, which
// scripts/ensure-chromium.sh installs) driven by chromedp, with axe-core (from npm, pinned in
// testdata/axe) injected for an accessibility check of the main pages.

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/console"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// TestBrowser drives the console in headless Chromium as its two audiences use it. A customer
// signs in, sees the balance drawn, opens a recovered job — refunded when it timed out, its late
// result then reclaiming the refund and settling at 137 of 300 GPU-seconds — and reads its money
// row by row in the API's words; downloads a statement whose opening plus lines is its closing
// and its closing the balance; finds another tenant's job exactly not found; and a form forged in
// the page is refused. An operator then opens the account by ID, finds the dead letter in every
// account's list, reads its detail and its Temporal UI link, and re-drives it through the job
// page's form, and the ledger recovers it (its refund reclaimed once). Both read, on the recovered
// job's page, each of its webhook events at the account's endpoint, its attempts and that it was
// delivered. Every page
// carries the Content-Security-Policy, the console logs no error, and axe-core finds no serious
// or critical accessibility violation on the main pages.
func TestBrowser(t *testing.T) {
	s := serve(t)
	acct := ledgertest.Account(t, s.Store, 1000)
	expires := time.Now().Add(30 * 24 * time.Hour)
	_, err := s.Store.Grant(context.Background(), ledgerdb.Credit{AccountID: acct, Amount: 25, Key: ledgertest.ID(t, "welcome"),
		Memo: "welcome credits", Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, ExpiresAt: &expires}})
	require.NoError(t, err)
	hookURL, deliverAll := hooked(t, s.Store, acct)
	job := recovered(t, s.Store, acct)
	deliverAll(job)
	dead := deadLetter(t, s.Store, acct)
	other := ledgertest.Account(t, s.Store, 1000)
	theirs := recovered(t, s.Store, other)
	customer, _ := s.key(t, apikeys.ScopeCustomer, acct)
	admin, _ := s.key(t, apikeys.ScopeAdmin, "")
	if dir := os.Getenv(screenshotsEnv); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}

	b := newTab(t, s.URL)
	b.open("/console/sign-in")
	b.accessible("sign-in")
	b.screenshot("sign-in")
	b.signIn(customer)
	require.Equal(t, "Account "+acct, b.text("h1"))
	require.Contains(t, b.pageCSP(), "default-src 'none'", "the page's Content-Security-Policy")

	// The balance, drawn: a path of the chart's step line, as wide as the period.
	require.Contains(t, b.text(".balance"), fmt.Sprint(balance(t, s.Store, acct)))
	width := eval[float64](b, `document.querySelector("svg.chart path.balance").getBBox().width`)
	require.Greater(t, width, 400.0, "the balance line spans the chart")
	// The credit blocks, in the order of spending: the welcome credits first, and what remains.
	blocks := b.text("section[aria-labelledby='blocks-heading'] tbody")
	require.Contains(t, blocks, "promotional")
	require.Contains(t, blocks, "welcome credits")
	require.Contains(t, blocks, expires.UTC().Format("2006-01-02"))
	b.accessible("account")
	b.screenshot("account")

	// The recovered job, explained.
	b.open("/console/accounts/" + acct + "/jobs")
	require.Contains(t, b.text("main table"), job.JobID)
	b.accessible("jobs")
	b.screenshot("jobs")
	b.open("/console/accounts/" + acct + "/jobs/" + job.JobID)
	rows := b.text(".rows")
	for _, want := range []string{
		"-300 credits Charged the 300-credit hold (300 GPU-seconds at 1 credit each)",
		"+300 credits Refunded 300 credits: the work did not finish in time.",
		"-300 credits The result arrived late: the refund was taken back (300 credits).",
		"+163 credits 137 of 300 GPU-seconds used: 163 credits returned.",
	} {
		require.Contains(t, rows, want)
	}
	require.Contains(t, b.text(".sentence"), "Done: the result arrived after the job had been refunded")
	require.Contains(t, b.text(".facts"), "price version 1")
	require.NotContains(t, b.text("main"), "timed out after 3 attempts", "a customer never reads the operator's detail")
	// What the account's endpoint was told about the job, and that it arrived.
	deliveries := b.text("table.deliveries")
	for _, event := range []string{"job.charged", "job.refunded", "job.reclaimed"} {
		require.Regexp(t, event+` msg_[0-9a-f]{32}, [^\n]*\s+`+regexp.QuoteMeta(hookURL)+` we_[0-9a-f]{32}\s+1\s+delivered \(last answer HTTP 204\)`, deliveries)
	}
	b.accessible("job")
	b.screenshot("job")

	// The statement, downloaded from the account page's form, adds up.
	b.open("/console/accounts/" + acct)
	b.do(chromedp.SetValue(chromedp.CSS("#from"), "2020-01-01"))
	body := b.download("form[action$='statement.csv'] button")
	records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	require.NoError(t, err)
	require.Greater(t, len(records), 3, body)
	opening, lines, closing := parseStatement(t, body)
	require.Equal(t, closing, opening+lines, body)
	require.Equal(t, balance(t, s.Store, acct), closing)
	b.noProblems()

	// Another tenant's job is not found, exactly as a job that does not exist.
	b.open("/console/accounts/" + other + "/jobs/" + theirs.JobID)
	require.Equal(t, "Not found", b.text("h1"))
	notFound := b.text("main")
	b.open("/console/accounts/" + acct + "/jobs/no-such-job")
	require.Equal(t, notFound, b.text("main"))

	// A form whose token is not the session's is refused, and the session stays.
	b.open("/console/accounts/" + acct)
	eval[bool](b, `document.querySelector("form.signout input[name=csrf]").value = "forged", true`)
	b.submit("form.signout button")
	require.Equal(t, "Form refused", b.text("h1"))
	b.open("/console/accounts/" + acct)
	require.Equal(t, "Account "+acct, b.text("h1"))
	b.noProblems("status of 404", "status of 403")

	// Sign out; the operator signs in, opens the account by ID and re-drives the dead letter.
	b.submit("form.signout button")
	require.Equal(t, "Sign in", b.text("h1"))
	b.signIn(admin)
	require.Equal(t, "Operator", b.text("h1"))
	b.accessible("operator")
	b.screenshot("operator")
	b.do(chromedp.SendKeys(chromedp.CSS("#account_id"), acct))
	b.submit("form[action='/console/operator/account'] button")
	require.Equal(t, "Account "+acct, b.text("h1"))
	b.open("/console/accounts/" + acct + "/jobs/" + job.JobID)
	require.Contains(t, b.text("table.deliveries"), "job.reclaimed", "the operator reads the job's webhook deliveries too")
	require.Contains(t, b.text("table.deliveries"), hookURL)
	b.open("/console/accounts/" + acct + "/jobs?dead_lettered=true")
	require.Contains(t, b.text("main table"), dead.JobID)
	b.open("/console/operator/dead-letters")
	require.Contains(t, b.text("main table"), dead.JobID, "every account's dead letters, newest first")
	b.accessible("dead letters")
	b.screenshot("dead-letters")
	b.submit(fmt.Sprintf("main table a[href$=%q]", "/jobs/"+dead.JobID))
	require.Equal(t, "Job "+dead.JobID, b.text("h1"))
	require.Contains(t, b.text(".operator"), "failed for good after 2 attempts", "the operator reads the detail")
	require.Contains(t, b.text(".operator"), "Refunded by its workflow")
	timeline := eval[string](b, `document.querySelector(".operator dd a").href`)
	require.Equal(t, s.Jobs.WorkflowURL(workflows.JobWorkflowID(acct, dead.JobID)), timeline, "the Temporal UI link, built from the configuration")
	require.True(t, strings.HasPrefix(timeline, s.Config.Temporal.UIURL+"/namespaces/"), timeline)
	b.accessible("operator's job")
	b.screenshot("operator-job")
	b.do(chromedp.SendKeys(chromedp.CSS("#note"), "customer asked"))
	b.submit(".operator form button")
	require.Equal(t, "Job "+dead.JobID, b.text("h1"))
	require.Contains(t, b.text("main .notice"), "Its work is running again", "the redrive says what it did")
	b.accessible("job with a notice")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := s.Jobs.Wait(ctx, dead, ledgerdb.StateRecovered)
	require.NoError(t, err, "the re-driven dead letter recovers")
	require.Equal(t, ledgerdb.StateRecovered, st.State)
	ledgertest.RequireRows(t, s.Store, dead, 40, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)

	for _, p := range []struct{ path, name string }{
		{"/console/operator/keys", "keys"}, {"/console/operator/alarms", "alarms"}, {"/console/operator/prices", "prices"},
	} {
		b.open(p.path)
		b.accessible(p.name)
		b.screenshot(p.name)
	}

	// Revoking a key, which is final, asks first on a page of its own; ticked, the keys page says
	// it is done.
	_, spare := s.key(t, apikeys.ScopeCustomerRead, acct)
	b.open("/console/operator/keys")
	link := fmt.Sprintf("main table a[href$=%q]", "/keys/"+spare.ID+"/revoke")
	require.True(t, eval[bool](b, `document.querySelector(`+strconv.Quote(link)+`) !== null`), "the key's revoke link")
	b.submit(link)
	require.Equal(t, "Revoke key "+spare.ID+"?", b.text("h1"))
	require.True(t, eval[bool](b, `document.querySelector("#confirm").required`), "the confirmation must be ticked")
	b.accessible("revoke")
	b.screenshot("revoke")
	b.do(chromedp.Click(chromedp.CSS("#confirm")))
	b.submit("main form button")
	require.Equal(t, "API keys", b.text("h1"))
	require.Contains(t, b.text("main .notice"), "Key "+spare.ID+" is revoked")
	b.noProblems()
}

// TestBrowserOnAPhone checks that every main page reads on a phone's screen (390 CSS pixels)
// without scrolling sideways, however long its IDs and however wide its tables: an account and its
// jobs whose IDs are 128 characters without a break, a credit block whose memo holds a long
// unbroken address, a recovered job with its webhook deliveries, and the operator's pages of the
// same — the document is never wider than the window (a wide table may scroll inside its own
// box).
func TestBrowserOnAPhone(t *testing.T) {
	s := serve(t)
	ctx := context.Background()
	acct := longID(t, "acct")
	_, err := s.Store.OpenAccount(ctx, acct)
	require.NoError(t, err)
	_, err = s.Store.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 1000, Key: "initial",
		Memo: "launch credits, see https://billing.example.com/agreements/2026/" + strings.Repeat("0123456789", 8)})
	require.NoError(t, err)
	_, deliverAll := hooked(t, s.Store, acct)
	job := recoveredAs(t, s.Store, acct, longID(t, "job"))
	deliverAll(job)
	dead := deadLetterAs(t, s.Store, acct, longID(t, "dead"))
	customer, _ := s.key(t, apikeys.ScopeCustomer, acct)
	admin, adminKey := s.key(t, apikeys.ScopeAdmin, "")

	b := newPhoneTab(t, s.URL)
	b.open("/console/sign-in")
	b.fitsTheScreen("sign-in")
	b.signIn(customer)
	for _, p := range []struct{ path, name string }{
		{"/console/accounts/" + acct, "account"},
		{"/console/accounts/" + acct + "/jobs", "jobs"},
		{"/console/accounts/" + acct + "/jobs/" + job.JobID, "job"},
		{"/console/accounts/" + acct + "/jobs/" + dead.JobID, "dead letter"},
	} {
		b.open(p.path)
		b.fitsTheScreen(p.name)
		if p.name == "account" || p.name == "job" {
			b.screenshot("phone-" + p.name)
		}
	}
	b.submit("form.signout button")
	b.signIn(admin)
	for _, p := range []struct{ path, name string }{
		{"/console/operator/", "operator"},
		{"/console/accounts/" + acct, "operator's account"},
		{"/console/accounts/" + acct + "/jobs/" + job.JobID, "operator's job"},
		{"/console/accounts/" + acct + "/jobs/" + dead.JobID, "operator's dead letter"},
		{"/console/operator/dead-letters", "dead letters"},
		{"/console/operator/alarms", "alarms"},
		{"/console/operator/prices", "prices"},
		{"/console/operator/keys", "keys"},
		{"/console/operator/keys/" + adminKey.ID + "/revoke", "revoke"},
	} {
		b.open(p.path)
		b.fitsTheScreen(p.name)
	}
	b.noProblems()
}

// longID is an ID of the ledger's greatest length with no character a line may break at.
func longID(t *testing.T, prefix string) string {
	t.Helper()
	id := prefix + strings.ReplaceAll(ledgertest.ID(t, ""), "-", "")
	for len(id) < ledgerdb.MaxIDLength {
		id += "x"
	}
	return id[:ledgerdb.MaxIDLength]
}

// fitsTheScreen fails the test if the page scrolls sideways: the document is wider than the
// window, or the window than the phone's screen (a mobile browser widens it to fit a page that
// does not). It names the elements that stick out.
func (b *tab) fitsTheScreen(name string) {
	b.t.Helper()
	widths := eval[[]float64](b, `[document.scrollingElement.scrollWidth, window.innerWidth]`)
	if widths[0] <= widths[1] && widths[1] == phoneWidth {
		return
	}
	out := eval[[]string](b, `(() => {
		const wide = e => e.getBoundingClientRect().right > `+strconv.Itoa(phoneWidth)+` + 0.5;
		return [...document.querySelectorAll("body *")].filter(e => wide(e) && ![...e.children].some(wide))
			.slice(0, 8).map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + " " + Math.round(e.getBoundingClientRect().right));
	})()`)
	b.t.Fatalf("the %s page scrolls sideways on a %d px screen: the document is %.0f px wide in a window of %.0f; sticking out: %v",
		name, phoneWidth, widths[0], widths[1], out)
}

// TestBrowserCountsInWords checks the numbers the console's own pages put into words: one credit
// is "1 credit", one job "1 job", a price "1 credit per GPU-second" — on the account page's
// balance and on a job's page (its price, hold, charge and rows), for a job of one credit on an
// account left with one. (The sentences the API and the console share come from package jobs.)
func TestBrowserCountsInWords(t *testing.T) {
	s := serve(t)
	acct, job := oneCreditDelivered(t, s.Store, "job")
	metered := recovered(t, s.Store, ledgertest.Account(t, s.Store, 1000))
	customer, _ := s.key(t, apikeys.ScopeCustomer, acct)
	admin, _ := s.key(t, apikeys.ScopeAdmin, "")

	b := newTab(t, s.URL)
	b.signIn(customer)
	require.Equal(t, "Balance now: 1 credit", b.text(".balance"))
	b.open("/console/accounts/" + acct + "/jobs/" + job.JobID)
	facts := b.text(".facts")
	require.Contains(t, facts, "1 credit per job, 1 job held")
	require.Regexp(t, `Held\s+1 credit\s`, facts)
	require.Regexp(t, `Charged as it stands\s+1 credit\s`, facts)
	require.Equal(t, "-1 credit", b.text(".rows .amount"))

	b.submit("form.signout button")
	b.signIn(admin)
	b.open("/console/accounts/" + metered.AccountID + "/jobs/" + metered.JobID)
	require.Contains(t, b.text(".facts"), "1 credit per GPU-second, 300 GPU-seconds held")
	b.noProblems()
}

// TestBrowserRateLimited checks the page a browser past its limit shows: the console's own, in
// HTML a person reads ("Too many requests", when to try again), under the console's
// Content-Security-Policy, accessible — never the API's JSON.
func TestBrowserRateLimited(t *testing.T) {
	const views = 3
	s := serveWith(t, func(_ *api.Options, c *console.Options) { c.SessionRate = slow(views) })
	acct := ledgertest.Account(t, s.Store, 100)
	customer, _ := s.key(t, apikeys.ScopeCustomer, acct)
	b := newTab(t, s.URL)
	b.signIn(customer) // its landing on the account page is the first page view
	for range views {
		b.open("/console/accounts/" + acct)
	}
	require.Equal(t, "Too many requests", b.text("h1"))
	require.Contains(t, b.text("main"), "You opened pages faster than the console serves one person. Nothing was done: try again in ")
	require.Contains(t, b.pageCSP(), "default-src 'none'")
	b.accessible("too many requests")
	b.screenshot("too-many-requests")
	b.noProblems("status of 429")
}
