package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestJobStatusShowsOperatorsTheScrubbedDetail checks `jobbill job status`, an operator's tool
// (trust: operators read what the GPU service said, never its passwords): a refunded job shows
// its reason code, the customer's fixed sentence and the detail — scrubbed also when the row was
// refunded before the ledger scrubbed its words; an unknown ID says it was never received.
func TestJobStatusShowsOperatorsTheScrubbedDetail(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	acct := ledgertest.Account(t, e.Store, 100)
	id := ledgertest.ID(t, "cli-refunded")
	key := ledgertest.Charged(t, e.Store, acct, id, 40, "s3://in").Job.Key()
	_, err := e.Store.Refund(ctx, key, ledgerdb.ReasonGPUFailed, "failed for good after 1 attempt", 1)
	require.NoError(t, err)
	// As a job refunded before the ledger scrubbed its words holds them.
	_, err = ledgertest.OwnerPool(t).Exec(ctx, `UPDATE jobs SET refund_reason = $2 WHERE id = $1`, key.String(),
		"failed for good after 1 attempt: connect to postgres://svc:hunter2@10.0.3.7:5432/gpu failed")
	require.NoError(t, err)

	out := e.ok(t, "job", "status", id, "--account", acct)
	require.NotContains(t, out, "hunter2")
	var st jobs.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Equal(t, ledgerdb.StateRefunded, st.State)
	require.Equal(t, ledgerdb.ReasonGPUFailed, st.Reason)
	require.Equal(t, "Not delivered: the work failed on the GPU side. Your 40 credits were refunded.", st.Message)
	require.Equal(t, "failed for good after 1 attempt: connect to postgres://svc:***@10.0.3.7:5432/gpu failed", st.Detail)

	out, err = e.run(t, "job", "status", ledgertest.ID(t, "never-sent"), "--account", acct)
	require.ErrorContains(t, err, jobs.NotReceivedMessage, out)
	ledgertest.RequireBalance(t, e.Store, acct, 100)
}

// TestJobReportConflictSaysTheFirstResultStands checks `jobbill job report` when an attempt
// reports a second, different result (the reversing-pairs and idempotent-doors rules: a job is
// settled once, whatever is reported twice): the command fails with the result's own fixed words —
// the first result stands, nothing was charged again — never a submission's "use a new ID", and
// writes nothing: the job keeps the first output and the one charge.
func TestJobReportConflictSaysTheFirstResultStands(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	acct := ledgertest.Account(t, e.Store, 100)
	kind := ledgertest.Fixed(t, e.Store, 10)
	id := ledgertest.ID(t, "job")
	key := ledgerdb.JobKey{AccountID: acct, JobID: id}
	e.ok(t, "job", "submit", id, acct, kind, "--input", "sim:hang")
	e.ok(t, "job", "report", id, "--account", acct, "--attempt", "1", "--output", "s3://out/first")
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := e.Jobs.Wait(waitCtx, key, ledgerdb.StateDelivered)
	require.NoError(t, err)

	out, err := e.run(t, "job", "report", id, "--account", acct, "--attempt", "1", "--output", "s3://out/second")
	require.ErrorContains(t, err, jobs.ResultConflictMessage, out)
	require.NotContains(t, err.Error(), "different request")
	st, err := e.Jobs.Status(ctx, key)
	require.NoError(t, err)
	require.Equal(t, "s3://out/first", st.OutputRef)
	ledgertest.RequireRows(t, e.Store, key, 10, ledgerdb.KindCharge)
	ledgertest.RequireBalance(t, e.Store, acct, 90)
}

// TestDeletedJobStillPaysForItsLateResult is the net-effect rule at the command line: deleting a
// job removes its content from view, never an obligation. A metered job (300 held at 1 credit)
// refunded after its workflow ended, then deleted with `jobbill job delete`, still takes the late
// result `jobbill job report --units-used 90` brings: the refund is reclaimed and the job settled
// at 90 (net −90), and `jobbill job status` answers state deleted, money state charged, with the
// figures.
func TestDeletedJobStillPaysForItsLateResult(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	acct := ledgertest.Account(t, e.Store, 1000)
	id := ledgertest.ID(t, "cli-tomb")
	key := ledgerdb.JobKey{AccountID: acct, JobID: id}
	_, err := e.Store.Submit(ctx, ledgerdb.Submission{JobID: id, AccountID: acct, Kind: ledgertest.Metered(t, e.Store, 1, 300), Request: []byte("s3://in")})
	require.NoError(t, err)
	_, err = e.Store.Charge(ctx, key)
	require.NoError(t, err)
	_, err = e.Store.Refund(ctx, key, ledgerdb.ReasonTimedOut, "timed out after 1 attempt", 1)
	require.NoError(t, err)

	var st jobs.Status
	out := e.ok(t, "job", "delete", id, "--account", acct)
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Equal(t, ledgerdb.StateDeleted, st.State)
	require.Equal(t, ledgerdb.MoneyRefunded, st.MoneyState)

	out = e.ok(t, "job", "report", id, "--account", acct, "--attempt", "1", "--output", "s3://late/"+id, "--units-used", "90")
	var report jobs.ResultReport
	require.NoError(t, json.Unmarshal([]byte(out), &report), out)
	require.Equal(t, jobs.PathFallback, report.Path, out)
	require.Equal(t, ledgerdb.Applied, report.Outcome, out)

	out = e.ok(t, "job", "status", id, "--account", acct)
	st = jobs.Status{}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Equal(t, ledgerdb.StateDeleted, st.State)
	require.Equal(t, ledgerdb.MoneyCharged, st.MoneyState)
	require.Equal(t, int64(90), st.Charged)
	require.Equal(t, int64(210), st.Released)
	require.Empty(t, st.OutputRef)
	ledgertest.RequireRowAmounts(t, e.Store, key,
		ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -300}, ledgertest.Row{Kind: ledgerdb.KindRefund, Amount: 300},
		ledgertest.Row{Kind: ledgerdb.KindReclaim, Amount: -300}, ledgertest.Row{Kind: ledgerdb.KindRelease, Amount: 210})
	ledgertest.RequireBalance(t, e.Store, acct, 1000-90)
}

// TestJobCommandsUseTheServersPrice checks `jobbill job submit` and `job report` with kinds (the
// price-list rule: a job names its kind, never an amount). A number where the kind goes — how a
// cost was given before — is refused as an unknown kind, saying prices are set by the server, and
// writes nothing (no job, balance unchanged); so is a max-units above the kind's. A metered job
// holds its unit price × max units; a negative --units-used is refused with nothing written; the
// usage reported settles it at used × unit price, with the rest of the hold released in one row. A
// job command names the job's account (job IDs belong to their account): a report without --account
// is refused with nothing written.
func TestJobCommandsUseTheServersPrice(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	acct := ledgertest.Account(t, e.Store, 1000)
	kind := ledgertest.Metered(t, e.Store, 3, 300)

	id := ledgertest.ID(t, "job")
	key := ledgerdb.JobKey{AccountID: acct, JobID: id}
	_, err := e.run(t, "job", "submit", id, acct, "40")
	require.EqualError(t, err, "unknown kind \"40\": prices are set by the server; `jobbill price list` shows the kinds")
	_, err = e.run(t, "job", "submit", id, acct, cliKind(t, "never-priced"))
	require.ErrorContains(t, err, "prices are set by the server")
	_, err = e.run(t, "job", "submit", id, acct, kind, "--max-units", "301")
	require.ErrorContains(t, err, "--max-units is 301")
	require.ErrorContains(t, err, "at most 300")
	_, err = e.run(t, "job", "submit", id, acct, kind, "--max-units", "0")
	require.ErrorContains(t, err, "--max-units is 0")
	_, err = e.Store.Job(ctx, key)
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound, "no refused submission was written")
	ledgertest.RequireBalance(t, e.Store, acct, 1000)

	var sub jobs.Submission
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "job", "submit", id, acct, kind, "--max-units", "100", "--input", "sim:hang")), &sub))
	require.Equal(t, ledgerdb.StateRunning, sub.Status.State)
	require.Equal(t, kind, sub.Status.Kind)
	require.Equal(t, int64(100), sub.Status.HeldUnits)
	require.Equal(t, int64(300), sub.Status.Held, "3 credits × 100 units, the server's price")

	_, err = e.run(t, "job", "report", id, "--account", acct, "--attempt", "1", "--output", "s3://out/"+id, "--units-used=-1")
	require.ErrorContains(t, err, "--units-used is -1; it must not be negative")
	_, err = e.run(t, "job", "report", id, "--attempt", "1", "--output", "s3://out/"+id, "--units-used", "37")
	require.ErrorContains(t, err, "--account is required")
	st, err := e.Jobs.Status(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, st.State, "the refused reports wrote nothing")

	e.ok(t, "job", "report", id, "--account", acct, "--attempt", "1", "--output", "s3://out/"+id, "--units-used", "37")
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err = e.Jobs.Wait(waitCtx, key, ledgerdb.StateDelivered)
	require.NoError(t, err)
	require.Equal(t, int64(111), st.Charged, "37 GPU-seconds × 3 credits")
	require.Equal(t, int64(189), st.Released)

	var status jobs.Status
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "job", "status", id, "--account", acct)), &status))
	require.Equal(t, st.Charged, status.Charged)
	require.Contains(t, status.Message, "111 of 300 held credits charged; 189 returned.")
	h, err := e.Store.History(ctx, acct, ledgerdb.HistoryPage{Limit: 100})
	require.NoError(t, err)
	var rows []ledgertest.Row
	for _, r := range h.Entries {
		if r.JobID == id {
			rows = append(rows, ledgertest.Row{Kind: r.Kind, Amount: r.Amount})
		}
	}
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -300}, {Kind: ledgerdb.KindRelease, Amount: 189}}, rows)
	ledgertest.RequireBalance(t, e.Store, acct, 1000-111)
}
