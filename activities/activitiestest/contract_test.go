package activitiestest_test

// The contract between the in-memory ledger the workflow tests run on and the real Postgres store:
// one table of cases, each a sequence of operations on a fresh job with the outcome, state, error
// and balance each must answer, run against both. If the two ever answer differently, the workflow
// tests would be proving the money rules against a ledger that is not the real one.

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/activities/activitiestest"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// ledger is what a contract case drives: the activities' ledger, and the set-up and read-back
// each implementation does its own way.
type ledger interface {
	activities.Ledger
	// fund opens an account with credits and returns its ID.
	fund(t *testing.T, credits int64) string
	// remove deletes a settled job (a tombstone).
	remove(jobID string) error
	// balance reads an account's balance.
	balance(accountID string) int64
}

type memory struct{ *activitiestest.MemoryLedger }

func (m memory) fund(t *testing.T, credits int64) string {
	id := ledgertest.ID(t, "acct")
	m.Grant(id, credits)
	return id
}
func (m memory) remove(jobID string) error    { return m.Delete(jobID) }
func (m memory) balance(account string) int64 { return m.Balance(account) }

type postgres struct{ *ledgerdb.Store }

func (p postgres) fund(t *testing.T, credits int64) string {
	return ledgertest.Account(t, p.Store, credits)
}
func (p postgres) remove(jobID string) error {
	_, err := p.Delete(context.Background(), jobID)
	return err
}
func (p postgres) balance(account string) int64 {
	b, err := p.Balance(context.Background(), account)
	if err != nil {
		panic(err)
	}
	return b
}

// step is one operation of a case and what it must answer.
type step struct {
	op      string // submit, submit-other, charge, charge-other, refund, reclaim, deliver, settle, attempt, alarm, delete
	arg     int    // attempts, where the operation takes them
	outcome ledgerdb.Outcome
	state   ledgerdb.State
	err     error
	balance int64
}

const (
	credits = 100
	cost    = 40
)

var contractCases = map[string][]step{
	"charge then repeat": {
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "charge", outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRunning, balance: 60},
	},
	"delivered on time": {
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60},
		{op: "settle", arg: 1, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60},
		{op: "refund", arg: 1, outcome: ledgerdb.NotApplied, state: ledgerdb.StateDelivered, balance: 60},
		{op: "reclaim", outcome: ledgerdb.NotApplied, state: ledgerdb.StateDelivered, balance: 60},
	},
	"refunded then recovered": {
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "refund", arg: 3, outcome: ledgerdb.Applied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "refund", arg: 3, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "deliver", arg: 3, outcome: ledgerdb.NotApplied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "settle", arg: 3, outcome: ledgerdb.Applied, state: ledgerdb.StateRecovered, balance: 60},
		{op: "settle", arg: 3, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 60},
		{op: "reclaim", outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 60},
	},
	"deliver then reclaim (the original success path)": {
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "reclaim", outcome: ledgerdb.NotApplied, state: ledgerdb.StateRunning, balance: 60},
		{op: "deliver", arg: 2, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60},
		{op: "deliver", arg: 2, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60},
	},
	"nothing applies before the charge": {
		{op: "refund", arg: 1, outcome: ledgerdb.NotApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "reclaim", outcome: ledgerdb.NotApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "settle", arg: 1, outcome: ledgerdb.NotApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "delete", err: ledgerdb.ErrJobActive, balance: 100},
	},
	"attempts only grow": {
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "attempt", arg: 2, outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "attempt", arg: 1, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: -1, err: ledgerdb.ErrInvalidInput, balance: 60},
		{op: "deliver", arg: -1, err: ledgerdb.ErrInvalidInput, balance: 60},
	},
	"the same request again, another request": {
		{op: "submit", outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "submit-other", err: ledgerdb.ErrConflict, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "charge-other", err: ledgerdb.ErrConflict, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
	},
	"a deleted job is gone for good": {
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60},
		{op: "delete", balance: 60},
		{op: "charge", err: ledgerdb.ErrGone, balance: 60},
		{op: "settle", arg: 1, err: ledgerdb.ErrGone, balance: 60},
		{op: "submit", err: ledgerdb.ErrGone, balance: 60},
	},
	"an alarm is raised once": {
		{op: "alarm", outcome: ledgerdb.Applied, balance: 100},
		{op: "alarm", outcome: ledgerdb.AlreadyApplied, balance: 100},
	},
}

// insufficient is a case of its own: the account cannot pay.
var insufficient = []step{
	{op: "charge", err: ledgerdb.ErrInsufficientCredits, state: ledgerdb.StateRejected, balance: 30},
	{op: "charge", err: ledgerdb.ErrRejected, state: ledgerdb.StateRejected, balance: 30},
}

// TestMemoryLedgerFollowsTheRealOne runs every contract case against the in-memory ledger and the
// real store, and requires both to answer each step the same — the outcome, the state, the error
// (errors.Is) and the balance (money rules 2, 3, 5, 6 and 8 through the same guards).
func TestMemoryLedgerFollowsTheRealOne(t *testing.T) {
	store := ledgertest.Store(t)
	impls := map[string]func() ledger{
		"memory":   func() ledger { return memory{activitiestest.NewMemoryLedger()} },
		"postgres": func() ledger { return postgres{store} },
	}
	cases := map[string][]step{"insufficient credits": insufficient}
	for name, steps := range contractCases {
		cases[name] = steps
	}
	for name, steps := range cases {
		for impl, open := range impls {
			t.Run(name+"/"+impl, func(t *testing.T) {
				l := open()
				funded := int64(credits)
				if name == "insufficient credits" {
					funded = 30
				}
				runCase(t, l, l.fund(t, funded), steps)
			})
		}
	}
}

func runCase(t *testing.T, l ledger, account string, steps []step) {
	ctx := context.Background()
	job := ledgertest.ID(t, "job")
	sub := ledgerdb.Submission{JobID: job, AccountID: account, Cost: cost, Request: []byte("s3://in/" + job)}
	other := sub
	other.Request = []byte("s3://in/other")
	_, err := l.Submit(ctx, sub)
	require.NoError(t, err)
	for i, s := range steps {
		var (
			tr  ledgerdb.Transition
			err error
		)
		switch s.op {
		case "submit":
			tr, err = l.Submit(ctx, sub)
		case "submit-other":
			tr, err = l.Submit(ctx, other)
		case "charge":
			tr, err = l.ChargeMatching(ctx, job, sub.Fingerprint())
		case "charge-other":
			tr, err = l.ChargeMatching(ctx, job, other.Fingerprint())
		case "refund":
			tr, err = l.Refund(ctx, job, "timed out", s.arg)
		case "reclaim":
			tr, err = l.Reclaim(ctx, job)
		case "deliver":
			tr, err = l.Deliver(ctx, job, s.arg)
		case "settle":
			tr, err = l.Settle(ctx, job, s.arg)
		case "attempt":
			tr, err = l.RecordAttempt(ctx, job, s.arg)
		case "alarm":
			tr.Outcome, err = l.RaiseAlarm(ctx, job, "refund", "out of range")
		case "delete":
			err = l.remove(job)
		default:
			t.Fatalf("unknown op %q", s.op)
		}
		at := fmt.Sprintf("step %d (%s)", i, s.op)
		if s.err != nil {
			require.ErrorIs(t, err, s.err, at)
		} else {
			require.NoError(t, err, at)
		}
		if s.outcome != "" {
			require.Equal(t, s.outcome, tr.Outcome, at)
		}
		if s.state != "" {
			require.Equal(t, s.state, tr.Job.State, at)
		}
		require.Equal(t, s.balance, l.balance(account), at)
	}
}
