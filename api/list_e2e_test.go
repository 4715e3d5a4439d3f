package api_test

import (
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// listed is a page of GET /v1/jobs: the jobs' IDs in order, the answers by ID, and the cursor.
type listed struct {
	ids     []string
	answers map[string]map[string]any
	next    string
	hasNext bool
}

func list(t *testing.T, base, key, query string) listed {
	t.Helper()
	a := call(t, base, "GET", "/v1/jobs?"+query, key, nil)
	require.Equal(t, 200, a.code, "%s: %s", query, a.raw)
	out := listed{answers: map[string]map[string]any{}}
	jobs, ok := a.body["jobs"].([]any)
	require.True(t, ok, "jobs is a list, also when empty: %s", a.raw)
	for _, j := range jobs {
		m := j.(map[string]any)
		id := m["job_id"].(string)
		out.ids = append(out.ids, id)
		out.answers[id] = m
	}
	next, has := a.body["next_cursor"]
	out.hasNext = has
	if has {
		out.next, _ = next.(string)
	}
	return out
}

// listEvery pages through GET /v1/jobs with query, and answers the IDs in the order listed.
func listEvery(t *testing.T, base, key, query string, limit int) (ids []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		q := query + "&limit=" + strconv.Itoa(limit)
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		page := list(t, base, key, q)
		pages++
		ids = append(ids, page.ids...)
		if !page.hasNext {
			return ids, pages
		}
		require.NotEmpty(t, page.next, "next_cursor is left out on the last page, never empty")
		require.Len(t, page.ids, limit, "only the last page is short")
		cursor = page.next
		require.Less(t, pages, 50)
	}
}

// TestListJobs checks GET /v1/jobs: a customer (or customer_read) key lists its own account's
// jobs and never another's (403 for another account, and B's jobs never appear in A's pages, not
// even B's job under an ID A chose too: job IDs belong to their account), an admin names the
// account, a runner key may not list; the jobs come newest first, each as GET /v1/jobs/{id}
// answers it, over pages that cover each job once and whose last page has no next_cursor; the
// filters by state, dead letter and creation time select what they say; and a bad filter is 400
// naming the parameter, with nothing read.
func TestListJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acctA, acctB := ledgertest.Account(t, e.Store, 1000), ledgertest.Account(t, e.Store, 1000)
	keyA, keyB := e.key(t, apikeys.ScopeCustomer, acctA), e.key(t, apikeys.ScopeCustomer, acctB)
	readA := e.key(t, apikeys.ScopeCustomerRead, acctA)
	admin, runner := e.key(t, apikeys.ScopeAdmin, ""), e.key(t, apikeys.ScopeRunner, "")
	base := e.serve(t, nil)
	kind := e.fixed(t, 10)

	// In order of submission, oldest first: three delivered, one refused for good (a dead
	// letter), one rejected for want of credits.
	var ids []string
	for i, input := range []string{"sim:ok", "sim:ok", "sim:fail", "sim:ok"} {
		id := ledgertest.ID(t, "job-"+strconv.Itoa(i))
		requireCharged(t, submit(t, base, keyA, job(id, acctA, kind, input)))
		ids = append(ids, id)
	}
	ids = append(ids, ledgertest.ID(t, "job-4"))
	require.Equal(t, 402, submit(t, base, keyA, job(ids[4], acctA, e.fixed(t, 5000), "sim:ok")).code)
	// B's jobs: one of its own ID, then one under the ID A chose first.
	jobB, twin := ledgertest.ID(t, "job-b"), ids[0]
	for _, id := range []string{jobB, twin} {
		requireCharged(t, submit(t, base, keyB, job(id, acctB, kind, "sim:ok")))
	}
	for _, i := range []int{0, 1, 3} {
		e.wait(t, acctA, ids[i], ledgerdb.StateDelivered)
	}
	e.wait(t, acctA, ids[2], ledgerdb.StateRefunded)
	e.wait(t, acctB, jobB, ledgerdb.StateDelivered)
	e.wait(t, acctB, twin, ledgerdb.StateDelivered)
	newestFirst := slices.Clone(ids)
	slices.Reverse(newestFirst)

	all := list(t, base, keyA, "")
	require.Equal(t, newestFirst, all.ids, "the caller's own account, newest first")
	require.False(t, all.hasNext, "one page: no next_cursor")
	for _, id := range ids {
		one := call(t, base, "GET", "/v1/jobs/"+id, keyA, nil)
		require.Equal(t, one.body, all.answers[id], "a listed job is what GET /v1/jobs/{id} answers")
		require.Equal(t, acctA, all.answers[id]["account_id"], "A's own job, never B's under the same ID")
	}
	require.NotContains(t, all.answers[ids[0]], "workflow_url", "a customer's answer has no internal URL")

	for _, limit := range []int{1, 2, 4, 5} {
		got, pages := listEvery(t, base, keyA, "", limit)
		require.Equal(t, newestFirst, got, "limit %d: every job once, in order", limit)
		require.Equal(t, (5+limit-1)/limit, pages)
	}

	listB := list(t, base, keyB, "")
	require.Equal(t, []string{twin, jobB}, listB.ids, "B lists only its own")
	require.Equal(t, acctB, listB.answers[twin]["account_id"])
	require.Equal(t, newestFirst, list(t, base, keyA, "account_id="+acctA).ids, "a customer key may name its own account")
	require.Equal(t, newestFirst, list(t, base, readA, "").ids, "a customer_read key lists its account too")
	asAdmin := list(t, base, admin, "account_id="+acctA)
	require.Equal(t, newestFirst, asAdmin.ids)
	require.NotEmpty(t, asAdmin.answers[ids[0]]["workflow_url"], "an admin gets the link")
	a := call(t, base, "GET", "/v1/jobs?account_id="+acctB, keyA, nil)
	require.Equal(t, 403, a.code, a.raw)
	require.NotContains(t, a.raw, jobB)
	a = call(t, base, "GET", "/v1/jobs?account_id="+ledgertest.ID(t, "never-opened"), admin, nil)
	require.Equal(t, 404, a.code, a.raw)
	require.Equal(t, "unknown_account", a.str("code"))

	createdAt := func(id string) string { return all.answers[id]["created_at"].(string) }
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"state=delivered", []string{ids[3], ids[1], ids[0]}},
		{"state=rejected,refunded", []string{ids[4], ids[2]}},
		{"state=rejected&state=refunded", []string{ids[4], ids[2]}},
		{"state=running", nil},
		{"state=deleted", nil},
		{"dead_lettered=true", []string{ids[2]}},
		{"dead_lettered=false", []string{ids[4], ids[3], ids[1], ids[0]}},
		{"dead_lettered=false&state=refunded", nil},
		{"created_after=" + url.QueryEscape(createdAt(ids[2])), []string{ids[4], ids[3]}},
		{"created_before=" + url.QueryEscape(createdAt(ids[2])), []string{ids[1], ids[0]}},
		{"created_after=" + url.QueryEscape(createdAt(ids[0])) + "&created_before=" + url.QueryEscape(createdAt(ids[4])), []string{ids[3], ids[2], ids[1]}},
	} {
		got, _ := listEvery(t, base, keyA, tc.query, 2)
		require.Equal(t, tc.want, got, tc.query)
	}

	own := "account_id=" + acctA + "&"
	for _, tc := range []struct{ query, param string }{
		{"", "account_id"}, // an admin names the account
		{"account_id=a/b", "account_id"},
		{own + "state=paid", "state"},
		{own + "state=", "state"},
		{own + "state=running,,delivered", "state"},
		{own + "dead_lettered=yes", "dead_lettered"},
		{own + "created_after=yesterday", "created_after"},
		{own + "created_before=2026-13-01T00:00:00Z", "created_before"},
		{own + "created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z", "created_after"},
		{own + "limit=0", "limit"},
		{own + "limit=201", "limit"},
		{own + "limit=ten", "limit"},
		{own + "limit=1&limit=2", "limit"},
		{own + "cursor=not-a-cursor", "cursor"},
		{own + "stat=running", "stat"},
	} {
		a := call(t, base, "GET", "/v1/jobs?"+tc.query, admin, nil)
		requireInvalid(t, a, tc.param, tc.query)
	}
	a = call(t, base, "GET", "/v1/jobs?account_id="+acctA, runner, nil)
	require.Equal(t, 403, a.code, "the GPU service's key reads no account's list: %s", a.raw)
	require.Equal(t, "forbidden", a.str("code"))

	ledgertest.RequireSound(t, e.Store, acctA, acctB)
}
