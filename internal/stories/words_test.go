package stories

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

// TestStoryLinesCountAttempts checks the line a story ends on, as a newcomer reads it in `make
// run`: a job delivered on its first try had "1 attempt", one that timed out three times "3
// attempts".
func TestStoryLinesCountAttempts(t *testing.T) {
	status := jobs.Status{JobID: "a-1", State: ledgerdb.StateDelivered, MoneyState: ledgerdb.MoneyCharged, Attempts: 1,
		Message: "Done. 40 credits were charged.", WorkflowURL: "http://ui/job"}
	require.Equal(t, "\n(a) success on the first try\n    job a-1: delivered, money charged, 1 attempt\n    Done. 40 credits were charged.\n    http://ui/job\n",
		storyLines("a", "success on the first try", status))
	status.Attempts = 3
	require.Contains(t, storyLines("b", "timed out", status), ", money charged, 3 attempts\n")
}
