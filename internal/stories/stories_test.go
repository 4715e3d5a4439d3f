package stories_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/internal/stories"
	"github.com/jobbill/jobbill/worker/workertest"
)

// TestPlayTellsEveryStory plays the stories `make run` shows a newcomer, against a real worker
// on the dev server and the test ledger: each story must end as it says (delivered, recovered,
// refunded, delivered once, rejected, the two metered ones settled at their usage: 137 and 90
// credits, and one recovered at 60 after the promotional block it drew from expired) and the
// account must audit clean — no block spent after its expiry — the balance is the sum of its rows, no job
// holds more than one charge, refund, reclaim or release, and each job's rows sum to −(units
// used × unit price).
func TestPlayTellsEveryStory(t *testing.T) {
	e := workertest.Shared(t, "stories", stories.Configure)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := stories.NewRun().Play(ctx, stories.Services{Ledger: e.Store, Jobs: e.Jobs, TimingOut: e.JobsWith(stories.TimeoutPolicy(e.Config))}, &out)
	require.NoError(t, err, out.String())
	for _, line := range []string{
		"(a) success on the first try", "(b) every attempt times out", "(c) every attempt fails",
		"(d) the same result signalled twice", "(e) insufficient credits",
		"(f) metered: 300 credits held, 137 GPU-seconds used", "137 of 300 held credits charged; 163 returned",
		"(g) metered: every attempt times out", "90 of 300 held credits charged; 210 returned",
		"(h) a promotional block expires while a job that drew from it waits for its late result",
		"the late result drew from the paid credits",
		"audit: every money rule holds",
	} {
		require.Contains(t, out.String(), line)
	}
}
