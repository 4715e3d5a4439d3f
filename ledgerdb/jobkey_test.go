package ledgerdb_test

// Job IDs belong to their account: two accounts may choose the same job ID, each gets a job of
// its own, and neither can see or move the other's. The ledger keys a job by its account and its
// ID; these tests hold it to that through the Store, and through the schema itself.

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestJobKeyNamesExactlyOneJob checks the key's text, "<account>/<job>": it is what the ledger
// stores, so a part that could hold a "/" (or be empty) would let two keys read alike. Validate
// refuses those, naming the part.
func TestJobKeyNamesExactlyOneJob(t *testing.T) {
	require.Equal(t, "acme/render-1", ledgerdb.JobKey{AccountID: "acme", JobID: "render-1"}.String())
	require.NoError(t, ledgerdb.JobKey{AccountID: "acme", JobID: "render-1"}.Validate())
	for name, c := range map[string]struct {
		key   ledgerdb.JobKey
		field string
	}{
		"slash in the job ID":     {ledgerdb.JobKey{AccountID: "acme", JobID: "a/b"}, "job ID"},
		"slash in the account ID": {ledgerdb.JobKey{AccountID: "ac/me", JobID: "b"}, "account ID"},
		"no job ID":               {ledgerdb.JobKey{AccountID: "acme"}, "job ID"},
		"no account ID":           {ledgerdb.JobKey{JobID: "render-1"}, "account ID"},
	} {
		err := c.key.Validate()
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, name)
		require.ErrorContains(t, err, c.field, name)
	}
}

// TestSameJobIDInTwoAccounts checks that job IDs belong to their account: three accounts submit
// the same job ID, each with a body of its own, and each gets its own job — Applied, not a repeat
// or a conflict of another's. Each job then goes its own way with its own money (the
// reversing-pairs, net-effect, price-list and sum-of-rows rules per account): one is charged,
// refunded and settled by its late result, one settled on time at its usage, one rejected for want
// of credits; each has exactly its own rows, each balance moves by its own job alone, and every
// account audits clean. Results, alarms and deletion are per job too: each job's result is recorded
// and marked applied on its own, an alarm of one is not the other's, and deleting one job burns its
// ID in its account only.
func TestSameJobIDInTwoAccounts(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	id := ledgertest.ID(t, "job")
	a, b, poor := ledgertest.Account(t, s, 100), ledgertest.Account(t, s, 50), ledgertest.Account(t, s, 10)
	ofA := ledgerdb.Submission{JobID: id, AccountID: a, Kind: ledgertest.Fixed(t, s, 40), Request: []byte("s3://in/a")}
	ofB := ledgerdb.Submission{JobID: id, AccountID: b, Kind: ledgertest.Metered(t, s, 3, 10), Request: []byte("s3://in/b")}
	// The poor account even sends A's very request: still its own job.
	ofPoor := ledgerdb.Submission{JobID: id, AccountID: poor, Kind: ofA.Kind, Request: ofA.Request}
	for _, sub := range []ledgerdb.Submission{ofA, ofB, ofPoor} {
		tr, err := s.Submit(ctx, sub)
		require.NoError(t, err, "account %s", sub.AccountID)
		require.Equal(t, ledgerdb.Applied, tr.Outcome, "account %s: its own job, not another account's", sub.AccountID)
		require.Equal(t, sub.Key(), tr.Job.Key())
		require.Equal(t, id, tr.Job.ID, "the job is named by the client's ID")
	}
	jobA, jobB, jobPoor := ofA.Key(), ofB.Key(), ofPoor.Key()

	// Each charge takes its own job's cost from its own account.
	tr, err := s.ChargeMatching(ctx, jobA, ofA.Fingerprint())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	require.Equal(t, int64(60), tr.BalanceAfter)
	tr, err = s.ChargeMatching(ctx, jobB, ofB.Fingerprint())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	require.Equal(t, int64(20), tr.BalanceAfter, "B's hold of 10 × 3")
	tr, err = s.ChargeMatching(ctx, jobPoor, ofPoor.Fingerprint())
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits)
	require.Equal(t, ledgerdb.StateRejected, tr.Job.State)

	// A times out and is refunded; B's job, of the same ID, runs on.
	tr, err = s.Refund(ctx, jobA, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	read, err := s.Job(ctx, jobB)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, read.State)

	// Both results land in the inbox, each under its own job.
	for _, r := range []ledgerdb.ResultReport{
		{Key: jobA, Attempt: 3, OutputRef: "s3://out/a"},
		{Key: jobB, Attempt: 1, OutputRef: "s3://out/b", UnitsUsed: ledgerdb.Units(4)},
	} {
		rec, err := s.RecordResult(ctx, r)
		require.NoError(t, err, r.Key.String())
		require.Equal(t, ledgerdb.Applied, rec.Outcome, "the result of %s is its own", r.Key)
	}
	pending, err := s.UnappliedResults(ctx, 0, 10, a, b)
	require.NoError(t, err)
	got := map[ledgerdb.JobKey]string{}
	for _, p := range pending {
		got[p.Report.Key] = p.Report.OutputRef
	}
	require.Equal(t, map[ledgerdb.JobKey]string{jobA: "s3://out/a", jobB: "s3://out/b"}, got)

	// A's late result recovers A; B's settles B at 4 of its 10 seconds, releasing 18.
	tr, err = s.Settle(ctx, jobA, 3, nil, "")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
	tr, err = s.Settle(ctx, jobB, 1, ledgerdb.Units(4), "")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateDelivered, tr.Job.State)
	requireSettled(t, tr.Job, 4)
	outcome, err := s.MarkResultApplied(ctx, jobA, 3, ledgerdb.AppliedSettled)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, outcome)
	pending, err = s.UnappliedResults(ctx, 0, 10, a, b)
	require.NoError(t, err)
	require.Len(t, pending, 1, "marking A's result applied left B's alone")
	require.Equal(t, jobB, pending[0].Report.Key)

	// Each job has exactly its own rows, each balance moved by its own job alone.
	ledgertest.RequireRows(t, s, jobA, 40, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	ledgertest.RequireRowAmounts(t, s, jobB,
		ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -30}, ledgertest.Row{Kind: ledgerdb.KindRelease, Amount: 18})
	ledgertest.RequireRows(t, s, jobPoor, 40)
	ledgertest.RequireBalance(t, s, a, 60)
	ledgertest.RequireBalance(t, s, b, 38)
	ledgertest.RequireBalance(t, s, poor, 10)
	for _, acct := range []string{a, b} {
		h, err := s.History(ctx, acct, ledgerdb.HistoryPage{})
		require.NoError(t, err)
		for _, e := range h.Entries {
			if e.JobID != "" {
				require.Equal(t, id, e.JobID, "account %s: a row names the client's job ID", acct)
			}
		}
	}

	// An alarm belongs to one job: the same step of the other is its own alarm.
	for _, job := range []ledgerdb.JobKey{jobA, jobB} {
		outcome, err := s.RaiseAlarm(ctx, job, "settle", "refused in "+job.AccountID)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.Applied, outcome, job.String())
	}
	alarms, err := s.Alarms(ctx, 10, b)
	require.NoError(t, err)
	require.Len(t, alarms, 1)
	require.Equal(t, id, alarms[0].JobID)
	require.Equal(t, b, alarms[0].AccountID)
	require.Equal(t, "refused in "+b, alarms[0].Message)

	// Deleting A's job burns the ID in A only: B's job still answers as itself.
	_, err = s.Delete(ctx, jobA)
	require.NoError(t, err)
	_, err = s.Submit(ctx, ofA)
	require.ErrorIs(t, err, ledgerdb.ErrGone)
	again, err := s.Submit(ctx, ofB)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Equal(t, ledgerdb.StateDelivered, again.Job.State)
	_, err = s.Charge(ctx, jobPoor)
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits, "the poor account's job stays rejected")
	ledgertest.RequireSound(t, s, a, b, poor)
}

// TestJobIsReachableOnlyThroughItsOwnAccount checks that a job of one account can never be read
// or moved through another account's key for the same ID: every call of the Store that names a
// job — read, read its request, charge, refund, reclaim, deliver, settle, record an attempt,
// delete, reject as an orphan, raise an alarm, record a result, mark one applied — answers
// ErrJobNotFound and writes nothing (the net-effect, sum-of-rows and remembered-IDs rules: the
// owner's job, rows and balance stay as they were, and the other account has no job, row, result or
// alarm). It does so at each state where the call would have moved something had it reached the
// job: submitting (a charge, a rejection), running (a refund, a delivery, a settlement, an attempt,
// a result), refunded (a reclaim) and delivered (a delete).
func TestJobIsReachableOnlyThroughItsOwnAccount(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	owner := ledgertest.Account(t, s, 1000)
	other := ledgertest.Account(t, s, 1000)
	kind := ledgertest.Fixed(t, s, 40)
	for _, state := range []ledgerdb.State{ledgerdb.StateSubmitting, ledgerdb.StateRunning, ledgerdb.StateRefunded, ledgerdb.StateDelivered} {
		t.Run(string(state), func(t *testing.T) {
			sub := ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: owner, Kind: kind, Request: []byte("s3://in/x")}
			_, err := s.Submit(ctx, sub)
			require.NoError(t, err)
			mine := sub.Key()
			theirs := ledgerdb.JobKey{AccountID: other, JobID: sub.JobID}
			if state != ledgerdb.StateSubmitting {
				_, err = s.Charge(ctx, mine)
				require.NoError(t, err)
			}
			switch state {
			case ledgerdb.StateRunning:
				_, err = s.RecordResult(ctx, ledgerdb.ResultReport{Key: mine, Attempt: 1, OutputRef: "s3://out/1"})
			case ledgerdb.StateRefunded:
				_, err = s.Refund(ctx, mine, ledgerdb.ReasonTimedOut, "timed out", 3)
			case ledgerdb.StateDelivered:
				_, err = s.Settle(ctx, mine, 1, nil, "")
			}
			require.NoError(t, err)
			before, err := s.Job(ctx, mine)
			require.NoError(t, err)
			require.Equal(t, state, before.State)
			rowsBefore := ledgertest.Rows(t, s, mine)
			ownerBalance, err := s.Balance(ctx, owner)
			require.NoError(t, err)

			for name, call := range map[string]func() error{
				"read":         func() error { _, err := s.Job(ctx, theirs); return err },
				"read request": func() error { _, err := s.JobRequest(ctx, theirs); return err },
				"charge":       func() error { _, err := s.Charge(ctx, theirs); return err },
				"charge matching the owner's request": func() error {
					_, err := s.ChargeMatching(ctx, theirs, sub.Fingerprint())
					return err
				},
				"refund":         func() error { _, err := s.Refund(ctx, theirs, ledgerdb.ReasonTimedOut, "timed out", 3); return err },
				"reclaim":        func() error { _, err := s.Reclaim(ctx, theirs); return err },
				"deliver":        func() error { _, err := s.Deliver(ctx, theirs, 1); return err },
				"settle":         func() error { _, err := s.Settle(ctx, theirs, 1, ledgerdb.Units(0), ""); return err },
				"record attempt": func() error { _, err := s.RecordAttempt(ctx, theirs, 2); return err },
				"delete":         func() error { _, err := s.Delete(ctx, theirs); return err },
				"reject orphan": func() error {
					_, err := s.RejectOrphan(ctx, theirs, ledgerdb.RejectWorkflowEnded)
					return err
				},
				"raise alarm": func() error { _, err := s.RaiseAlarm(ctx, theirs, "refund", "forged"); return err },
				"record result": func() error {
					_, err := s.RecordResult(ctx, ledgerdb.ResultReport{Key: theirs, Attempt: 1, OutputRef: "s3://out/1"})
					return err
				},
				"mark result applied": func() error {
					_, err := s.MarkResultApplied(ctx, theirs, 1, ledgerdb.AppliedByFallback)
					return err
				},
			} {
				err := call()
				require.ErrorIs(t, err, ledgerdb.ErrJobNotFound, "%s through another account's key", name)
				require.False(t, errors.Is(err, ledgerdb.ErrInvalidInput), name)
			}

			after, err := s.Job(ctx, mine)
			require.NoError(t, err)
			require.Equal(t, before, after, "the owner's job changed")
			require.Equal(t, rowsBefore, ledgertest.Rows(t, s, mine), "the owner's rows changed")
			require.Empty(t, ledgertest.Rows(t, s, theirs))
			ledgertest.RequireBalance(t, s, owner, ownerBalance)
			ledgertest.RequireBalance(t, s, other, 1000)
			h, err := s.History(ctx, other, ledgerdb.HistoryPage{})
			require.NoError(t, err)
			require.Len(t, h.Entries, 1, "the other account holds only its grant")
			alarms, err := s.Alarms(ctx, 10, owner, other)
			require.NoError(t, err)
			require.Empty(t, alarms)
			pending, err := s.UnappliedResults(ctx, 0, 10, owner, other)
			require.NoError(t, err)
			var waiting []ledgerdb.JobKey
			for _, p := range pending {
				require.Equal(t, owner, p.Report.Key.AccountID, "a result was recorded for the other account")
				if p.Report.Key == mine {
					waiting = append(waiting, p.Report.Key)
				}
			}
			if state == ledgerdb.StateRunning {
				require.Len(t, waiting, 1, "the owner's result is still waiting, unapplied")
			} else {
				require.Empty(t, waiting)
			}
		})
	}
}

// TestSchemaHoldsJobKeysToTheirAccount checks, at the schema, that a job's key is its account's:
// even the table's owner cannot write a job whose key names another account than the one that
// pays for it, or a key of another shape (no account, no job, a third part, an account that only
// begins like the payer's) — CHECK jobs_id_is_key — nor a ledger row on one account for another
// account's job — CHECK ledger_entries_job_of_account, which keeps each account's rows (the
// sum-of-rows rule) its own jobs'. The application role's one door, ledger_submit, is held to the
// same check. Each refused statement has a twin with the right account that the schema takes, so
// that the refusal is the key's and nothing else's; all run in transactions that are rolled back.
func TestSchemaHoldsJobKeysToTheirAccount(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	owner := ledgertest.OwnerPool(t)
	a, b := ledgertest.Account(t, s, 100), ledgertest.Account(t, s, 100)
	job := ledgertest.Charged(t, s, a, ledgertest.ID(t, "job"), 40, "x").Job.Key()
	q := func(v string) string { return "'" + v + "'" }
	newJob := func(key, account string) string {
		return `INSERT INTO jobs (id, account_id, cost, request_fingerprint) VALUES (` + q(key) + `, ` + q(account) + `, 1, '\x00')`
	}
	id := ledgertest.ID(t, "forged")
	// A refund row of a's job, written on an account whose balance it moves by +40.
	refundRow := func(account string, balance int64) string {
		return `INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after) VALUES (` +
			q(account) + `, ` + q(job.String()) + `, 'refund', 40, ` + strconv.FormatInt(balance+40, 10) + `)`
	}

	for _, c := range []struct {
		name, refused, taken, constraint string
	}{
		{"a job keyed under another account", newJob(b+"/"+id, a), newJob(a+"/"+id, a), "jobs_id_is_key"},
		{"a key without an account", newJob(id, a), newJob(a+"/"+id, a), "jobs_id_is_key"},
		{"a key without a job ID", newJob(a+"/", a), newJob(a+"/"+id, a), "jobs_id_is_key"},
		{"a key of three parts", newJob(a+"/"+id+"/x", a), newJob(a+"/"+id, a), "jobs_id_is_key"},
		{"an account that only begins like the payer's", newJob(a+"0/"+id, a), newJob(a+"/"+id, a), "jobs_id_is_key"},
		{"a ledger row of another account's job", refundRow(b, 100), refundRow(a, 60), "ledger_entries_job_of_account"},
	} {
		for _, stmt := range []string{c.refused, c.taken} {
			tx, err := owner.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, stmt)
			require.NoError(t, tx.Rollback(ctx))
			if stmt == c.taken {
				require.NoError(t, err, "%s: the right account's twin: %s", c.name, stmt)
				continue
			}
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, "%s: %s", c.name, stmt)
			require.Equal(t, "23514", pgErr.Code, "%s: %s", c.name, pgErr.Message)
			require.Equal(t, c.constraint, pgErr.ConstraintName, c.name)
		}
	}

	// The application role's door: ledger_submit with a key of another account than the payer.
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT ledger_submit($1, $2, $3, NULL, $4, $5)`,
		ledgerdb.JobKey{AccountID: b, JobID: id}.String(), a, ledgertest.Fixed(t, s, 40), []byte{1}, []byte("x"))
	require.NoError(t, tx.Rollback(ctx))
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "jobs_id_is_key", pgErr.ConstraintName)

	ledgertest.RequireRows(t, s, job, 40, ledgerdb.KindCharge)
	ledgertest.RequireBalance(t, s, a, 60)
	ledgertest.RequireBalance(t, s, b, 100)
	_, err = s.Job(ctx, ledgerdb.JobKey{AccountID: b, JobID: id})
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound)
}
