package ledgerdb_test

// The charge's guards: it checks the request it bills, and a refused or rejected charge says why,
// honestly — against the real Postgres, as the application role.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestChargeChecksTheRequestItBills protects the price-list and remembered-IDs rules for a workflow
// started directly under a job's ID: a charge that names another request's fingerprint charges
// nothing, and the job stays a placeholder; the matching fingerprint charges it once.
func TestChargeChecksTheRequestItBills(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 100)
	sub := ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: acct, Kind: ledgertest.Fixed(t, s, 40), Request: []byte("s3://in/theirs")}
	_, err := s.Submit(ctx, sub)
	require.NoError(t, err)

	other := sub
	other.Request = []byte("s3://in/mine")
	tr, err := s.ChargeMatching(ctx, sub.Key(), other.Fingerprint())
	require.ErrorIs(t, err, ledgerdb.ErrConflict)
	require.Equal(t, ledgerdb.StateSubmitting, tr.Job.State)
	require.Empty(t, entries(t, s, sub.Key()))

	tr, err = s.ChargeMatching(ctx, sub.Key(), sub.Fingerprint())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	ledgertest.RequireBalance(t, s, acct, 60)
}

// TestRejectReasonsAreHonest protects the submission rules: a job rejected for want of credits
// answers ErrInsufficientCredits; one rejected because its workflow ended before charging it (or
// another program's workflow holds its ID) answers ErrRejected with its reason — not insufficient
// credits, which a top-up would seem to fix — and every rejected ID stays rejected after a top-up.
func TestRejectReasonsAreHonest(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, poor := submitted(t, s, 10, 40)
	_, err := s.Charge(ctx, poor)
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits)

	for _, reason := range []ledgerdb.RejectReason{ledgerdb.RejectWorkflowEnded, ledgerdb.RejectWorkflowIDTaken} {
		sub := ledgerdb.Submission{JobID: ledgertest.ID(t, "orphan"), AccountID: acct, Kind: ledgertest.Fixed(t, s, 5), Request: []byte("x")}
		_, err := s.Submit(ctx, sub)
		require.NoError(t, err)
		job := sub.Key()
		tr, err := s.RejectOrphan(ctx, job, reason)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.Applied, tr.Outcome)
		require.Equal(t, reason, tr.Job.RejectReason)
		_, err = s.Charge(ctx, job)
		require.ErrorIs(t, err, ledgerdb.ErrRejected)
		require.NotErrorIs(t, err, ledgerdb.ErrInsufficientCredits)
		again, err := s.RejectOrphan(ctx, job, reason)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	}
	_, err = s.RejectOrphan(ctx, poor, ledgerdb.RejectInsufficientCredits)
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "only an orphan's reasons reject a placeholder")

	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 1000, Key: "top-up"})
	require.NoError(t, err)
	_, err = s.Charge(ctx, poor)
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits, "a rejected ID stays rejected after a top-up")
	ledgertest.RequireBalance(t, s, acct, 1010)
}
