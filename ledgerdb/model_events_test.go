package ledgerdb_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/jobbill/jobbill/webhooks"
)

// listen gives the account an endpoint from its opening, so that the derive passes write every
// event its rows make, and a low-balance threshold.
func (r *modelRun) listen(acct string) {
	ctx := context.Background()
	ws := webhooks.NewStore(r.s.Pool())
	if _, err := ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: "http://127.0.0.1:9/model"},
		webhooks.URLPolicy{AllowPrivate: true}); err != nil {
		r.fail("an endpoint for %s: %v", acct, err)
	}
	low := int64(30 + r.rng.IntN(70))
	if _, err := ws.SetLowBalanceThreshold(ctx, acct, &low); err != nil {
		r.fail("the low-balance threshold of %s: %v", acct, err)
	}
	r.model.Accounts[acct].LowBalance = &low
}

// compareEvents runs derive passes until they have read every transaction of the account — a
// pass reads a transaction only once every older one in the database has ended, so it is waited
// on, never failed — and checks the events against the model's: each one's type, the row or job
// it was derived from, and what a top-up request asked.
func (r *modelRun) compareEvents(acct string, entryIDs []int64) {
	ctx := context.Background()
	ws := webhooks.NewStore(r.s.Pool())
	for {
		if _, _, err := ws.Derive(ctx, 1000); err != nil {
			r.fail("derive pass: %v", err)
		}
		var read bool
		if err := r.s.Pool().QueryRow(ctx, `SELECT coalesce((SELECT horizon FROM webhook_derive_cursor) > greatest(
				(SELECT max(xid) FROM ledger_entries WHERE account_id = $1),
				(SELECT max(outcome_xid) FROM jobs WHERE account_id = $1)), true)`, acct).Scan(&read); err != nil {
			r.fail("the derive cursor: %v", err)
		}
		if read {
			break
		}
	}
	a := r.model.Accounts[acct]
	a.DeriveTopUps()
	rows, err := r.s.Pool().Query(ctx, `SELECT type, coalesce(entry_id, 0), coalesce(substr(job_id, char_length(account_id) + 2), ''),
			CASE WHEN type = 'topup.requested' THEN (payload->>'amount')::bigint ELSE 0 END
		FROM webhook_events WHERE account_id = $1`, acct)
	if err != nil {
		r.fail("events: %v", err)
	}
	var got []string
	for rows.Next() {
		var typ, job string
		var entry, amount int64
		if err := rows.Scan(&typ, &entry, &job, &amount); err != nil {
			r.fail("events: %v", err)
		}
		got = append(got, fmt.Sprintf("%s row %d job %q amount %d", typ, entry, job, amount))
	}
	if err := rows.Err(); err != nil {
		r.fail("events: %v", err)
	}
	var want []string
	for _, e := range a.Events() {
		// A job's events name the job, an account's the row they were derived from.
		entry := int64(0)
		if e.Job == "" {
			entry = entryIDs[e.Row]
		}
		want = append(want, fmt.Sprintf("%s row %d job %q amount %d", e.Type, entry, e.Job, e.Amount))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		r.fail("%s: the events derived are\n  %v\nthe model says\n  %v", acct, got, want)
	}
}
