package ledgerdb_test

// The ledger's alarms: each is recorded once — against the real Postgres, as the application role.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestAlarmsAreRecordedOnce: an alarm is raised once per job and step, keeps its first message,
// and lists with its account.
func TestAlarmsAreRecordedOnce(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, job := submitted(t, s, 100, 40)
	outcome, err := s.RaiseAlarm(ctx, job, "refund", "amount out of range\x00 and more")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, outcome)
	outcome, err = s.RaiseAlarm(ctx, job, "refund", "again")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, outcome)
	_, err = s.RaiseAlarm(ctx, ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "never")}, "refund", "x")
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound)
	alarms, err := s.Alarms(ctx, 10, acct)
	require.NoError(t, err)
	require.Len(t, alarms, 1)
	require.Equal(t, "refund", alarms[0].Step)
	require.Equal(t, job.JobID, alarms[0].JobID, "an alarm names the client's job ID")
	require.Equal(t, acct, alarms[0].AccountID)
	require.Equal(t, "amount out of range  and more", alarms[0].Message, "control characters are clipped")
}
