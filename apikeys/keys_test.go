package apikeys_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
)

// TestKeyIDRefusalQuotesWholeCharacters checks that the refusal of a key ID that cannot be one
// quotes what was sent shortened by whole characters, never cut between the bytes of one.
func TestKeyIDRefusalQuotesWholeCharacters(t *testing.T) {
	err := apikeys.ValidateKeyID("key_" + strings.Repeat("€", 100))
	require.Error(t, err)
	require.True(t, utf8.ValidString(err.Error()), err.Error())
	require.NotContains(t, err.Error(), `\x`, "a character cut in two")
	require.Contains(t, err.Error(), `"key_`+strings.Repeat("€", 76)+`…"`)
}
