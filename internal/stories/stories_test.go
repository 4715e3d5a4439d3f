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
// refunded, delivered once, rejected) and the account must audit clean — the balance is the
// sum of its rows and no job holds more than one charge, refund or reclaim.
func TestPlayTellsEveryStory(t *testing.T) {
	e := workertest.Shared(t, "stories", stories.Configure)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, stories.Play(ctx, e.Store, e.Jobs, &out), out.String())
	for _, line := range []string{
		"(a) success on the first try", "(b) every attempt times out", "(c) every attempt fails",
		"(d) the same result signalled twice", "(e) insufficient credits", "audit: every money rule holds",
	} {
		require.Contains(t, out.String(), line)
	}
}
