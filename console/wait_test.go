package console

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWaitInWords checks how the rate limit's page says how long to wait: whole seconds up to a
// minute and a half, then minutes, then hours, rounded up so that the browser never comes back
// too soon.
func TestWaitInWords(t *testing.T) {
	for seconds, words := range map[int]string{1: "1 second", 2: "2 seconds", 90: "90 seconds", 91: "2 minutes",
		5400: "90 minutes", 5401: "2 hours", 10000: "3 hours"} {
		require.Equal(t, words, waitWords(seconds), seconds)
	}
}
