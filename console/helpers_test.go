package console_test

// The console's tests run it as `jobbill api` serves it: the API's handler with the console
// mounted, over the real Postgres test database and the real Temporal dev server, with a worker of
// this process on a task queue of its own (bash scripts/ensure-postgres.sh and
// scripts/ensure-temporal.sh start them; make test runs both).

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/console"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
	"github.com/jobbill/jobbill/worker/workertest"
)

// site is a console served for one test.
type site struct {
	*workertest.Env
	// URL is the server's base ("http://127.0.0.1:port").
	URL string
}

// serve starts the API with the console mounted, over the shared test worker.
func serve(t *testing.T) *site {
	t.Helper()
	return serveLogged(t, zap.NewNop())
}

// serveLogged is serve with the API's and the console's log going to logger.
func serveLogged(t *testing.T, logger *zap.Logger) *site {
	t.Helper()
	return serveWith(t, func(o *api.Options, _ *console.Options) { o.Logger = logger })
}

// serveWith starts the API with the console mounted as serve does, the options changed by mod
// first (the console's are built into the API's after it).
func serveWith(t *testing.T, mod func(*api.Options, *console.Options)) *site {
	t.Helper()
	env := workertest.Shared(t, "console-test", func(cfg *config.Config) {
		cfg.Policy = workertest.QuickPolicy()
	})
	cfg := config.Default().API
	// Tests send pages far faster than a person; the rate-limit tests set the limits they check.
	cfg.RateLimit = config.RateLimit{PerSecond: 10_000, Burst: 10_000}
	opts := api.Options{Config: cfg, Jobs: env.Jobs, Ledger: env.Store, Logger: zap.NewNop()}
	copts := console.Options{Jobs: env.Jobs, Ledger: env.Store,
		SessionRate: cfg.RateLimit, AddressRate: cfg.RateLimit}
	if mod != nil {
		mod(&opts, &copts)
	}
	if copts.Logger == nil {
		copts.Logger = opts.Logger
	}
	opts.Console = console.New(copts)
	hs := httptest.NewServer(api.New(opts).Handler())
	t.Cleanup(hs.Close)
	return &site{Env: env, URL: hs.URL}
}

// key is the secret of a new API key of the scope (for the account, for the customer scopes).
func (s *site) key(t *testing.T, scope apikeys.Scope, account string) (string, apikeys.Key) {
	t.Helper()
	name := t.Name()
	if len(name) > apikeys.MaxNameLength {
		name = name[:apikeys.MaxNameLength]
	}
	created, err := apikeys.NewStore(s.Store.Pool()).Create(context.Background(), apikeys.Spec{Scope: scope, AccountID: account, Name: name})
	require.NoError(t, err)
	return created.Secret, created.Key
}

// browser is a client with a cookie jar that follows no redirect, so a test sees each answer.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// page is an answer, its body read.
type page struct {
	code int
	body string
	resp *http.Response
}

func get(t *testing.T, c *http.Client, u string) page {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	return read(t, resp)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) page {
	t.Helper()
	resp, err := c.PostForm(u, form)
	require.NoError(t, err)
	return read(t, resp)
}

func read(t *testing.T, resp *http.Response) page {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return page{code: resp.StatusCode, body: string(b), resp: resp}
}

var csrfPattern = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the token of the page's first form.
func csrf(t *testing.T, p page) string {
	t.Helper()
	m := csrfPattern.FindStringSubmatch(p.body)
	require.NotNil(t, m, "the page has no form with a CSRF token:\n%s", p.body)
	return m[1]
}

// signIn signs the client in with the secret through the sign-in form, and fails the test unless
// it lands on a page.
func (s *site) signIn(t *testing.T, c *http.Client, secret string) {
	t.Helper()
	form := get(t, c, s.URL+"/console/sign-in")
	require.Equal(t, http.StatusOK, form.code)
	answer := post(t, c, s.URL+"/console/sign-in", url.Values{"csrf": {csrf(t, form)}, "key": {secret}})
	require.Equal(t, http.StatusSeeOther, answer.code, answer.body)
}

// signedIn is a browser signed in with a new key of the scope (for the account, for the customer
// scopes), and the key.
func (s *site) signedIn(t *testing.T, scope apikeys.Scope, account string) (*http.Client, apikeys.Key) {
	t.Helper()
	secret, key := s.key(t, scope, account)
	c := browser(t)
	s.signIn(t, c, secret)
	return c, key
}

// oneCreditDelivered opens an account granted 2 credits and delivers on it a job sold at 1 credit,
// its ID made from tag: the figures a customer reads as one, in words. It answers the account and
// the job.
func oneCreditDelivered(t *testing.T, s *ledgerdb.Store, tag string) (string, ledgerdb.JobKey) {
	t.Helper()
	acct := ledgertest.Account(t, s, 2)
	job := ledgertest.Charged(t, s, acct, ledgertest.ID(t, tag), 1, "s3://in/one").Job.Key()
	_, err := s.Deliver(context.Background(), job, 1)
	require.NoError(t, err)
	return acct, job
}

// sessions counts the console's sessions of a key, as the owner sees them.
func sessions(t *testing.T, keyID string) int {
	t.Helper()
	var n int
	require.NoError(t, ledgertest.OwnerPool(t).QueryRow(context.Background(),
		`SELECT count(*) FROM console_sessions WHERE key_id = $1`, keyID).Scan(&n))
	return n
}

// recovered builds, through the ledger's own functions, the job of the system's hardest story: a
// metered job (1 credit per GPU-second, 300 held) refunded because it timed out, whose result then
// arrived late with 137 seconds used: the refund is reclaimed, and the job settled at its usage.
func recovered(t *testing.T, s *ledgerdb.Store, acct string) ledgerdb.JobKey {
	t.Helper()
	return recoveredAs(t, s, acct, ledgertest.ID(t, "job"))
}

// recoveredAs is recovered with the job's ID given.
func recoveredAs(t *testing.T, s *ledgerdb.Store, acct, jobID string) ledgerdb.JobKey {
	t.Helper()
	ctx := context.Background()
	sub := ledgerdb.Submission{JobID: jobID, AccountID: acct, Kind: ledgertest.Metered(t, s, 1, 300),
		Request: []byte("s3://in/recovered")}
	_, err := s.Submit(ctx, sub)
	require.NoError(t, err)
	_, err = s.Charge(ctx, sub.Key())
	require.NoError(t, err)
	_, err = s.Refund(ctx, sub.Key(), ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
	require.NoError(t, err)
	// The late result, as the workflow bills it: one transaction reclaims the refund and settles.
	used := int64(137)
	tr, err := s.Settle(ctx, sub.Key(), 3, &used, "s3://out/recovered")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
	return sub.Key()
}

// deadLetter builds a refunded job whose work failed for good, with no workflow left: a dead
// letter waiting for a redrive.
func deadLetter(t *testing.T, s *ledgerdb.Store, acct string) ledgerdb.JobKey {
	t.Helper()
	return deadLetterAs(t, s, acct, ledgertest.ID(t, "dead"))
}

// deadLetterAs is deadLetter with the job's ID given.
func deadLetterAs(t *testing.T, s *ledgerdb.Store, acct, jobID string) ledgerdb.JobKey {
	t.Helper()
	job := ledgertest.Charged(t, s, acct, jobID, 40, "s3://in/dead")
	_, err := s.Refund(context.Background(), job.Job.Key(), ledgerdb.ReasonGPUFailed, "failed for good after 2 attempts: CUDA error", 2)
	require.NoError(t, err)
	return job.Job.Key()
}

// hooked gives the account a webhook endpoint whose receiver answers 204, and answers its URL and
// a function that sends every event written so far for the account until each delivery of the
// job has finished.
func hooked(t *testing.T, s *ledgerdb.Store, acct string) (string, func(job ledgerdb.JobKey)) {
	t.Helper()
	ctx := context.Background()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	ws := webhooks.NewStore(s.Pool())
	url := receiver.URL + "/hooks"
	_, err := ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: url}, webhooks.URLPolicy{AllowPrivate: true})
	require.NoError(t, err)
	worker := webhooks.NewWorker(webhooks.Options{Store: ws, AllowPrivateURLs: true, Accounts: []string{acct}})
	return url, func(job ledgerdb.JobKey) {
		t.Helper()
		require.NoError(t, ws.CatchUp(ctx))
		require.Eventually(t, func() bool {
			_, err := worker.RunOnce(ctx)
			require.NoError(t, err)
			ds, err := ws.JobDeliveries(ctx, job)
			require.NoError(t, err)
			for _, d := range ds {
				if d.Status == "pending" {
					return false
				}
			}
			return len(ds) > 0
		}, time.Minute, 20*time.Millisecond, "the job's events are delivered")
	}
}
