package webhooks_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestDerivedEventSaysWhatItsTransitionSaid checks that an event derived late (a pass held back
// by an open transaction, as docs/operations.md "Derive lag" says happens) carries its
// transition's time and figures, not the job's state at derive time: a job rejected and then
// deleted keeps its rejection time; a job refunded after 1 attempt says 1 attempt even when
// later attempts (a redrive's) were recorded before the pass ran.
func TestDerivedEventSaysWhatItsTransitionSaid(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 100)
	fixed := ledgertest.Fixed(t, s, 10)

	// Hold every pass back: a transaction with an ID stays open across the transitions.
	hold, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	inTx(t, hold, `SELECT outcome FROM ledger_post($1, 'grant', 1, $2, '')`, ledgertest.Account(t, s, 0), ledgertest.ID(t, "hold"))

	rejected := submit(t, s, acct, fixed)
	applied(t, ledgerdb.Applied)(s.RejectOrphan(ctx, rejected, ledgerdb.RejectWorkflowEnded))
	var rejectedAt time.Time
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT updated_at FROM jobs WHERE id = $1`, rejected.String()).Scan(&rejectedAt))

	refunded := chargedJob(t, s, acct, fixed)
	applied(t, ledgerdb.Applied)(s.Refund(ctx, refunded, ledgerdb.ReasonTimedOut, "", 1))

	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT pg_sleep(0.05)`).Scan(new(string)))
	_, err = s.Delete(ctx, rejected)
	require.NoError(t, err)
	_, err = s.RecordAttempt(ctx, refunded, 4) // the redrive's attempts, on the refunded job
	require.NoError(t, err)
	require.NoError(t, hold.Commit(ctx))

	evs := events(t, ws, acct)
	for _, e := range evs {
		switch {
		case e.Type == "job.rejected":
			assert.True(t, e.CreatedAt.Equal(rejectedAt), "job.rejected at %s, but the job was rejected at %s", e.CreatedAt, rejectedAt)
		case e.Type == "job.refunded":
			assert.Equal(t, 1.0, data(t, e)["attempts"], "job.refunded was refunded after 1 attempt")
		}
	}
}

// TestDeliveredEventBalanceIsTheBalanceAtDelivery checks that job.delivered's balance_after is
// the balance when the job was delivered: a debit whose transaction began before the delivery but
// wrote and committed after it is not part of that balance.
func TestDeliveredEventBalanceIsTheBalanceAtDelivery(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 100)
	job := chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10)) // balance 90

	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.NoError(t, tx.QueryRow(ctx, `SELECT now()`).Scan(new(time.Time))) // its time is fixed now
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT pg_sleep(0.02)`).Scan(new(string)))
	applied(t, ledgerdb.Applied)(s.Settle(ctx, job, 1, nil, "")) // delivered at balance 90, no release row
	balance, err := s.Balance(ctx, acct)
	require.NoError(t, err)
	inTx(t, tx, `SELECT outcome FROM ledger_post($1, 'adjustment', -30, $2, 'after')`, acct, ledgertest.ID(t, "adj"))
	require.NoError(t, tx.Commit(ctx))

	for _, e := range events(t, ws, acct) {
		if e.Type == "job.delivered" {
			require.Equal(t, float64(balance), data(t, e)["balance_after"], "the balance when the job was delivered")
			return
		}
	}
	t.Fatal("no job.delivered event")
}
