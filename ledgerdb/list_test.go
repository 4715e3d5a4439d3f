package ledgerdb_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// listAll pages through an account's jobs as f selects them, limit at a time, and answers their
// IDs in the order listed and the number of pages.
func listAll(t *testing.T, s *ledgerdb.Store, f ledgerdb.JobFilter) (ids []string, pages int) {
	t.Helper()
	for {
		page, err := s.ListJobs(context.Background(), f)
		require.NoError(t, err)
		pages++
		require.LessOrEqual(t, len(page.Jobs), f.Limit)
		for _, j := range page.Jobs {
			require.Equal(t, f.AccountID, j.AccountID, "only the account's own jobs are listed")
			ids = append(ids, j.ID)
		}
		if page.Next == nil {
			return ids, pages
		}
		require.Len(t, page.Jobs, f.Limit, "only the last page is short")
		cursor, err := ledgerdb.ParseJobCursor(page.Next.String())
		require.NoError(t, err, "a cursor survives its round trip as text")
		f.After = &cursor
		require.Less(t, pages, 100, "the pages end")
	}
}

// TestListJobsNewestFirstInPages checks the ledger's job list, as the application role reads it:
// one account's jobs and never another's (the trust boundary of docs/design.md), newest first by
// (created_at, ID) — also when jobs share a creation time across a page boundary — each exactly
// once over pages of any size, with filters by state, dead letter and creation time.
func TestListJobsNewestFirstInPages(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 1000)
	other := ledgertest.Account(t, s, 1000)
	kind := ledgertest.Fixed(t, s, 10)
	submit := func(account, id string) {
		_, err := s.Submit(ctx, ledgerdb.Submission{JobID: id, AccountID: account, Kind: kind, Request: []byte(id)})
		require.NoError(t, err)
	}
	// Job IDs belong to their account: the other account chooses the very same IDs, and its jobs
	// are still never listed, nor does a cursor of one account's list step into the other's.
	var ids []string
	for _, prefix := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		id := ledgertest.ID(t, prefix)
		submit(acct, id)
		submit(other, id)
		ids = append(ids, id)
	}
	key := func(id string) ledgerdb.JobKey { return ledgerdb.JobKey{AccountID: acct, JobID: id} }
	// States: a submitting, b running, c refunded (a dead letter), d delivered, e deleted (once
	// delivered), f and g submitting.
	for _, id := range ids[1:5] {
		_, err := s.Charge(ctx, key(id))
		require.NoError(t, err)
	}
	_, err := s.Refund(ctx, key(ids[2]), ledgerdb.ReasonTimedOut, "timed out after 1 attempt", 1)
	require.NoError(t, err)
	for _, id := range ids[3:5] {
		_, err = s.Deliver(ctx, key(id), 1)
		require.NoError(t, err)
	}
	_, err = s.Delete(ctx, key(ids[4]))
	require.NoError(t, err)
	// Three jobs created at the same instant: their IDs order them. The ledger stores a job under
	// its key, "<account>/<job>".
	same := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	var sameKeys []string
	for _, id := range ids[1:4] {
		sameKeys = append(sameKeys, key(id).String())
	}
	tag, err := ledgertest.OwnerPool(t).Exec(ctx, `UPDATE jobs SET created_at = $1 WHERE id = ANY ($2)`, same, sameKeys)
	require.NoError(t, err)
	require.EqualValues(t, 3, tag.RowsAffected())

	newestFirst := func(want ...string) []string {
		jobs := map[string]ledgerdb.Job{}
		for _, id := range want {
			j, err := s.Job(ctx, key(id))
			require.NoError(t, err)
			jobs[id] = j
		}
		// Newest first; among jobs created at the same instant, IDs in descending byte order.
		slices.SortFunc(want, func(x, y string) int {
			if c := jobs[y].CreatedAt.Compare(jobs[x].CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(y, x)
		})
		return want
	}
	all := newestFirst(slices.Clone(ids)...)
	for _, limit := range []int{1, 2, 3, 7, 200} {
		got, pages := listAll(t, s, ledgerdb.JobFilter{AccountID: acct, Limit: limit})
		require.Equal(t, all, got, "limit %d", limit)
		require.Equal(t, (len(ids)+limit-1)/limit, pages, "limit %d", limit)
	}

	for _, tc := range []struct {
		name string
		f    ledgerdb.JobFilter
		want []string
	}{
		{"submitting", ledgerdb.JobFilter{States: []ledgerdb.State{ledgerdb.StateSubmitting}}, []string{ids[0], ids[5], ids[6]}},
		{"running or delivered", ledgerdb.JobFilter{States: []ledgerdb.State{ledgerdb.StateRunning, ledgerdb.StateDelivered}}, []string{ids[1], ids[3]}},
		{"deleted", ledgerdb.JobFilter{States: []ledgerdb.State{ledgerdb.StateDeleted}}, []string{ids[4]}},
		{"dead letters", ledgerdb.JobFilter{DeadLettered: flag(true)}, []string{ids[2]}},
		{"not dead letters", ledgerdb.JobFilter{DeadLettered: flag(false)}, []string{ids[0], ids[1], ids[3], ids[4], ids[5], ids[6]}},
		{"dead and delivered", ledgerdb.JobFilter{DeadLettered: flag(true), States: []ledgerdb.State{ledgerdb.StateDelivered}}, nil},
		{"created before the hour", ledgerdb.JobFilter{CreatedBefore: same.Add(time.Microsecond)}, ids[1:4]},
		{"created after the hour", ledgerdb.JobFilter{CreatedAfter: same}, []string{ids[0], ids[4], ids[5], ids[6]}},
		{"created in the hour", ledgerdb.JobFilter{CreatedAfter: same.Add(-time.Microsecond), CreatedBefore: same.Add(time.Microsecond)}, ids[1:4]},
	} {
		tc.f.AccountID, tc.f.Limit = acct, 2
		got, _ := listAll(t, s, tc.f)
		want := newestFirst(slices.Clone(tc.want)...)
		if len(want) == 0 {
			want = nil
		}
		require.Equal(t, want, got, tc.name)
	}

	page, err := s.ListJobs(ctx, ledgerdb.JobFilter{AccountID: ledgertest.ID(t, "acct-never-opened"), Limit: 10})
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
	require.Empty(t, page.Jobs)
}

// TestListJobsRefusesBadFilters checks that a filter the ledger cannot answer truthfully — an
// unknown state, a page size out of range, an invalid account ID or cursor, an empty time range —
// is refused as invalid input before anything is read.
func TestListJobsRefusesBadFilters(t *testing.T) {
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	now := time.Now()
	for name, f := range map[string]ledgerdb.JobFilter{
		"unknown state":    {AccountID: acct, Limit: 10, States: []ledgerdb.State{"paid"}},
		"limit 0":          {AccountID: acct},
		"limit 201":        {AccountID: acct, Limit: ledgerdb.MaxJobPage + 1},
		"no account":       {Limit: 10},
		"bad account":      {AccountID: "a/b", Limit: 10},
		"empty time range": {AccountID: acct, Limit: 10, CreatedAfter: now, CreatedBefore: now},
		"bad cursor":       {AccountID: acct, Limit: 10, After: &ledgerdb.JobCursor{CreatedAt: now, JobID: "a/b"}},
	} {
		_, err := s.ListJobs(context.Background(), f)
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, name)
	}
	for _, cursor := range []string{"", "not base64!", "bm8tZG90", "MTIz", "eC5qb2I"} {
		_, err := ledgerdb.ParseJobCursor(cursor)
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "cursor %q", cursor)
	}
}

func flag(b bool) *bool { return &b }
