package console_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/console"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// TestRedriveSaysWhatHappened checks that "Run its work again" tells its operator what it did,
// on the job's page it leads back to (the POST redirects there, so a reload sends nothing again):
// that the work is running again and how the job's page will show the outcome, or — for a job
// that is not a dead letter — that nothing was run, and why. The notice is shown once. A
// refused redrive changes nothing: the job's rows are as they were.
func TestRedriveSaysWhatHappened(t *testing.T) {
	s := serve(t)
	acct := ledgertest.Account(t, s.Store, 1000)
	dead := deadLetter(t, s.Store, acct)
	delivered := recovered(t, s.Store, acct)
	c, _ := s.signedIn(t, apikeys.ScopeAdmin, "")
	deadPage := s.URL + "/console/accounts/" + acct + "/jobs/" + dead.JobID

	answer := post(t, c, deadPage+"/redrive", url.Values{"csrf": {csrf(t, get(t, c, deadPage))}, "note": {"customer asked"}})
	require.Equal(t, http.StatusSeeOther, answer.code, answer.body)
	require.Equal(t, "/console/accounts/"+acct+"/jobs/"+dead.JobID, answer.resp.Header.Get("Location"))
	shown := get(t, c, deadPage)
	require.Equal(t, http.StatusOK, shown.code)
	require.Contains(t, shown.body, `<p class="notice" role="status">Its work is running again`)
	require.Contains(t, shown.body, "if it fails again, the job stays a dead letter")
	require.NotContains(t, get(t, c, deadPage).body, "Its work is running again", "a notice is shown once")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := s.Jobs.Wait(ctx, dead, ledgerdb.StateRecovered)
	require.NoError(t, err, "the redrive ran the work")

	before := rowsOf(t, s.Store, delivered)
	recoveredPage := s.URL + "/console/accounts/" + acct + "/jobs/" + delivered.JobID
	answer = post(t, c, recoveredPage+"/redrive", url.Values{"csrf": {csrf(t, get(t, c, recoveredPage))}})
	require.Equal(t, http.StatusSeeOther, answer.code, answer.body)
	refused := get(t, c, recoveredPage)
	require.Contains(t, refused.body, `<p class="notice problem" role="status">Not run again: only a refunded (dead-lettered) job&#39;s work can run again, and this job is recovered. Nothing was changed.</p>`)
	require.Equal(t, before, rowsOf(t, s.Store, delivered), "the refused redrive wrote nothing")
}

// TestRedriveWhileTemporalIsDown checks the answer to a redrive when Temporal takes the connection
// and never answers (as one restarting does): within the console's request timeout — the API's
// behaviour — a 503 page that says the console cannot tell whether the work started and to try
// again, with Retry-After, under the console's headers; never a 500. The job stays a dead letter.
func TestRedriveWhileTemporalIsDown(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = silent.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, conn)
		}
	}()
	s := serveWith(t, func(o *api.Options, c *console.Options) {
		down, err := temporalclient.NewLazyClient(temporalclient.Options{HostPort: silent.Addr().String(), Namespace: workertest.Namespace()})
		require.NoError(t, err)
		t.Cleanup(down.Close)
		c.Jobs = jobs.New(jobs.Options{Temporal: down, Ledger: o.Ledger, TaskQueue: "nobody-polls", Namespace: workertest.Namespace()})
		c.RequestTimeout = 3 * time.Second
	})
	acct := ledgertest.Account(t, s.Store, 1000)
	dead := deadLetter(t, s.Store, acct)
	c, _ := s.signedIn(t, apikeys.ScopeAdmin, "")
	page := s.URL + "/console/accounts/" + acct + "/jobs/" + dead.JobID

	answer := post(t, c, page+"/redrive", url.Values{"csrf": {csrf(t, get(t, c, page))}})
	require.Equal(t, http.StatusServiceUnavailable, answer.code, answer.body)
	require.Equal(t, "text/html; charset=utf-8", answer.resp.Header.Get("Content-Type"))
	require.Contains(t, answer.resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	retry, err := strconv.Atoi(answer.resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.Positive(t, retry)
	require.Contains(t, answer.body, "cannot tell whether this was done")
	require.Contains(t, answer.body, "Try again in a moment")
	job, err := s.Store.Job(context.Background(), dead)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, job.State)
}

// rowsOf is the job's ledger rows.
func rowsOf(t *testing.T, s *ledgerdb.Store, job ledgerdb.JobKey) []ledgerdb.Entry {
	t.Helper()
	rows, err := s.JobEntries(context.Background(), job)
	require.NoError(t, err)
	return rows
}
