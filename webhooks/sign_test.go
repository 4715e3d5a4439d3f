package webhooks_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/webhooks"
)

// TestIDRefusalsQuoteWholeCharacters checks that the refusal of an endpoint ID, an event ID or a
// receiver URL that cannot be one quotes what was sent shortened by whole characters, never cut
// between the bytes of one.
func TestIDRefusalsQuoteWholeCharacters(t *testing.T) {
	for _, err := range []error{
		webhooks.ValidateEndpointID("we_" + strings.Repeat("€", 100)),
		webhooks.ValidateEventID("msg_" + strings.Repeat("€", 100)),
		webhooks.URLPolicy{}.Check(strings.Repeat("€", 100)),
	} {
		require.Error(t, err)
		require.True(t, utf8.ValidString(err.Error()), err.Error())
		require.NotContains(t, err.Error(), `\x`, "a character cut in two")
		require.Contains(t, err.Error(), strings.Repeat("€", 60)+`…"`)
	}
}
