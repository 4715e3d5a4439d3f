package apiclient_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/ledgerdb"
)

// TestNewJobIDNeverCollides checks the remembered-IDs rule from the client's side: a job ID is
// remembered forever, so an ID another submission already used (a counter restarted, a timestamp
// shared by two machines) would answer that job — or 409, or 410 — instead of charging the new one.
// IDs from NewJobID carry 128 random bits, are valid for the ledger, and keep their prefix.
func TestNewJobIDNeverCollides(t *testing.T) {
	shape := regexp.MustCompile(`^render-[a-z2-7]{26}$`)
	seen := map[string]bool{}
	for range 10_000 {
		id, err := apiclient.NewJobID("render")
		require.NoError(t, err)
		require.Regexp(t, shape, id)
		require.NoError(t, ledgerdb.ValidateID("job ID", id))
		require.False(t, seen[id], "NewJobID repeated %s", id)
		seen[id] = true
	}

	bare, err := apiclient.NewJobID("")
	require.NoError(t, err)
	require.Regexp(t, `^[a-z2-7]{26}$`, bare, "no prefix: the random part alone")
	require.NoError(t, ledgerdb.ValidateID("job ID", bare))

	longest := strings.Repeat("p", ledgerdb.MaxIDLength-27)
	id, err := apiclient.NewJobID(longest)
	require.NoError(t, err)
	require.Len(t, id, ledgerdb.MaxIDLength)
	require.NoError(t, ledgerdb.ValidateID("job ID", id))
}

// TestNewJobIDRefusesABadPrefix checks that a prefix that would make an ID the ledger refuses is
// an error naming it, before any ID exists to be submitted.
func TestNewJobIDRefusesABadPrefix(t *testing.T) {
	for _, prefix := range []string{"-render", "render/4k", "render 4k", "rendér", strings.Repeat("p", ledgerdb.MaxIDLength-26)} {
		id, err := apiclient.NewJobID(prefix)
		require.ErrorIs(t, err, apiclient.ErrInvalidInput, "prefix %q", prefix)
		require.Empty(t, id)
	}
}
