package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// stopMidCharge plays a charge that is slow to commit — the account's row held busy from a
// Postgres connection of the test's own, as an operator's psql session would — under a
// submission of the account's job id, which submit makes on a goroutine; the job's workflow is
// terminated through the Temporal client once the charge waits for the row, and the row is
// released once the submission has learnt of it: it answered, or it waits behind the charge for
// the ledger's decision. It answers what submit answered.
func stopMidCharge[T any](t *testing.T, e *env, acct, id string, submit func() T) T {
	t.Helper()
	busy := ledgertest.HoldAccount(t, acct)
	answered := make(chan T, 1)
	go func() { answered <- submit() }()
	charging := busy.AwaitWaiter(time.Minute)
	require.NoError(t, e.Client.TerminateWorkflow(context.Background(), workflows.JobWorkflowID(acct, id), "", "stopped mid-charge"))
	return ledgertest.ReleaseWhenHeard(t, busy, charging, answered, time.Minute)
}

// requireEndsFairly waits — on the ledger alone, a read that heals nothing — until a job stopped
// mid-charge is decided and settled, and checks what an answer told of its money against that:
// money and message, as answered, say not charged only if the ledger never charged the job; the
// job ends refunded by a heal run (stopped by an operator) or rejected with nothing charged, never
// running with no workflow; and a decided answer is the ledger's. The account keeps its credits.
func (e *env) requireEndsFairly(t *testing.T, key ledgerdb.JobKey, state, money, message string, credits int64) ledgerdb.Job {
	t.Helper()
	leaves := func(states ...ledgerdb.State) ledgerdb.Job {
		for deadline := time.Now().Add(time.Minute); ; {
			job, err := e.Store.Job(context.Background(), key)
			require.NoError(t, err)
			if !slices.Contains(states, job.State) {
				return job
			}
			require.False(t, time.Now().After(deadline), "job still %s a minute after its workflow closed: nothing settled it", job.State)
			time.Sleep(100 * time.Millisecond)
		}
	}
	leaves(ledgerdb.StateSubmitting)
	if slices.Contains(e.kinds(t, key.AccountID, key.JobID), ledgerdb.KindCharge) {
		require.NotEqual(t, string(ledgerdb.MoneyNotCharged), money, "the answer said not charged, the ledger charged")
		require.NotContains(t, strings.ToLower(message), "not charged", "the ledger charged")
		final := leaves(ledgerdb.StateSubmitting, ledgerdb.StateRunning)
		require.Equal(t, ledgerdb.StateRefunded, final.State)
		require.Equal(t, ledgerdb.ReasonStoppedByOperator, final.RefundReason)
		require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund}, e.kinds(t, key.AccountID, key.JobID))
	}
	final := leaves(ledgerdb.StateSubmitting, ledgerdb.StateRunning)
	if final.State != ledgerdb.StateRefunded {
		require.Equal(t, ledgerdb.StateRejected, final.State)
		require.Empty(t, e.kinds(t, key.AccountID, key.JobID))
	}
	if state != string(ledgerdb.StateSubmitting) {
		require.Equal(t, string(final.State), state, "a decided answer is the ledger's")
		require.Equal(t, string(final.MoneyState()), money)
	}
	require.Equal(t, credits, e.balance(t, key.AccountID))
	ledgertest.RequireSound(t, e.Store, key.AccountID)
	return final
}

// TestSubmissionNeverSaysNotChargedBeforeTheLedger plays, as a black box over HTTP, a charge held up
// by a busy account row and a POST /v1/jobs whose workflow an operator terminates meanwhile
// (stopMidCharge). The money rule of every answer: it never says "not charged" while a charge can
// still commit. So the POST's answer says not_charged (or "not charged" in words) only if the
// ledger never charges the job, and the job ends refunded by a heal run or rejected with nothing
// charged — never running with no workflow — without anybody reading it by ID (a read that would
// heal it); its list entry, its status and the audit then agree (requireEndsFairly). Before, the
// POST answered 503 "you were not charged" and the charge then committed 300 credits to a job no
// workflow ran, listed as running.
func TestSubmissionNeverSaysNotChargedBeforeTheLedger(t *testing.T) {
	t.Parallel()
	const cost, credits = 300, 1000
	e := newSite(t, credits)
	secret := e.key(t, apikeys.ScopeCustomer, e.acct)
	id := ledgertest.ID(t, "closed-under")
	body, err := json.Marshal(job(id, e.acct, e.fixed(t, cost), "sim:hang"))
	require.NoError(t, err)

	type posted struct {
		code int
		raw  string
		err  error
	}
	got := stopMidCharge(t, e.env, e.acct, id, func() posted {
		req, err := http.NewRequest("POST", e.base+"/v1/jobs", bytes.NewReader(body))
		if err != nil {
			return posted{err: err}
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return posted{err: err}
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return posted{code: resp.StatusCode, raw: string(raw), err: err}
	})
	require.NoError(t, got.err)
	t.Logf("POST answered %d: %s", got.code, got.raw)
	var answer struct {
		Status struct {
			State      string `json:"state"`
			MoneyState string `json:"money_state"`
			Message    string `json:"message"`
		} `json:"status"`
		State      string `json:"state"`
		MoneyState string `json:"money_state"`
		Message    string `json:"message"`
	}
	require.NoError(t, json.Unmarshal([]byte(got.raw), &answer), got.raw)
	final := e.requireEndsFairly(t, ledgerdb.JobKey{AccountID: e.acct, JobID: id}, answer.Status.State+answer.State,
		answer.Status.MoneyState+answer.MoneyState, answer.Status.Message+answer.Message, credits)

	listed := call(t, e.base, "GET", "/v1/jobs", secret, nil)
	require.Equal(t, 200, listed.code, listed.raw)
	require.Contains(t, listed.raw, `"state":"`+string(final.State)+`"`, "the list tells the ledger's state")
	require.NotContains(t, listed.raw, `"state":"running"`)
	read := call(t, e.base, "GET", "/v1/jobs/"+id, secret, nil)
	require.Equal(t, 200, read.code, read.raw)
	require.Equal(t, string(final.State), read.str("state"))
	report, err := invariants.Check(context.Background(), invariants.Options{Ledger: e.Store, Temporal: e.Client,
		Namespace: e.Config.Temporal.Namespace, AccountID: e.acct})
	require.NoError(t, err)
	require.True(t, report.OK(), "%+v", report.Violations)
}

// TestClientNeverSaysNotChargedBeforeTheLedger plays the same stop mid-charge under the Go client's
// Run, which submits and then polls until the job is settled: what it answers — the settled
// status, or an error that says where the money stands — is never "not charged" of a job the
// ledger charges, and is the ledger's end: refunded (healed) or rejected (requireEndsFairly).
func TestClientNeverSaysNotChargedBeforeTheLedger(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const cost, credits = 300, 1000
	acct := ledgertest.Account(t, e.Store, credits)
	c := &apiclient.Client{BaseURL: e.serve(t, nil), Key: e.key(t, apikeys.ScopeCustomer, acct), PollInterval: 100 * time.Millisecond}
	id, err := apiclient.NewJobID("render")
	require.NoError(t, err)
	tracked := c.Track(apitype.SubmitRequest{JobID: id, AccountID: acct, Kind: e.fixed(t, cost), InputRef: "sim:hang"})

	type ran struct {
		st  apitype.Status
		err error
	}
	got := stopMidCharge(t, e, acct, id, func() ran {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := c.Run(ctx, tracked)
		return ran{st, err}
	})
	t.Logf("Run answered %+v, %v", got.st, got.err)
	if got.err != nil {
		// Only a rejection ends Run with an error here; it says nothing was charged.
		require.ErrorIs(t, got.err, apiclient.ErrInsufficientCredits)
	}
	message := got.st.Message
	if got.err != nil {
		message += " " + got.err.Error()
	}
	e.requireEndsFairly(t, ledgerdb.JobKey{AccountID: acct, JobID: id}, got.st.State, got.st.MoneyState, message, credits)
}

// TestSubmissionRefundedBeforeItsAnswerIsNotCreated plays the stop mid-charge (stopMidCharge)
// whose charge commits first: the charge holds the job's row while it waits for the busy account,
// so the submission's rejection of the orphan queues behind it, finds the job charged and heals it
// at once — refunded, stopped_by_operator — before the POST answers. The money rule of the answer's
// status: a status code says where the money stands, as the body does. 201 says "charged: the
// hold is taken", so it is never the answer of a job that is not charged now; this one's charge was
// taken and given back, so the POST answers 200 with the job as it stands — refunded, its reason
// and its message — and duplicate false (this request made it). Nothing is charged: a charge and
// its refund, the account's credits whole.
func TestSubmissionRefundedBeforeItsAnswerIsNotCreated(t *testing.T) {
	t.Parallel()
	const cost, credits = 300, 1000
	e := newSite(t, credits)
	secret := e.key(t, apikeys.ScopeCustomer, e.acct)
	id := ledgertest.ID(t, "refunded-before-answer")
	body := job(id, e.acct, e.fixed(t, cost), "sim:hang")

	got := stopMidCharge(t, e.env, e.acct, id, func() answer { return call(t, e.base, "POST", "/v1/jobs", secret, body) })
	t.Logf("POST answered %d: %s", got.code, got.raw)
	require.Equal(t, string(ledgerdb.StateRefunded), got.str("status", "state"), "the charge committed before the rejection: %s", got.raw)
	require.Equal(t, string(ledgerdb.MoneyRefunded), got.str("status", "money_state"))
	require.Equal(t, string(ledgerdb.ReasonStoppedByOperator), got.str("status", "reason"))
	require.Equal(t, http.StatusOK, got.code, "a job refunded before the answer is not answered 201 (charged): %s", got.raw)
	require.Equal(t, "false", got.str("duplicate"), "this request made the job")
	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund}, e.kinds(t, e.acct, id))
	require.Equal(t, int64(credits), e.balance(t, e.acct))

	// The same request again answers the job as it stands, 200 again, and charges nothing.
	again := call(t, e.base, "POST", "/v1/jobs", secret, body)
	require.Equal(t, http.StatusOK, again.code, again.raw)
	require.Equal(t, "true", again.str("duplicate"))
	require.Equal(t, string(ledgerdb.MoneyRefunded), again.str("status", "money_state"))
	require.Equal(t, int64(credits), e.balance(t, e.acct))
}
