package ledgerdb_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
)

// TestShortenCutsWholeCharacters checks how a message quotes what a caller sent: at most the given
// number of characters and never a part of one (a cut between the bytes of a character prints as
// \xe2\x82 in a quoted string, or breaks a page's UTF-8), at the end of a word when one ends in the
// last third, marked with "…"; text that fits is left whole.
func TestShortenCutsWholeCharacters(t *testing.T) {
	require.Equal(t, "déjà vu", ledgerdb.Shorten("déjà vu", 7))
	require.Equal(t, strings.Repeat("€", 40)+"…", ledgerdb.Shorten(strings.Repeat("€", 50), 40), "three bytes a character")
	require.Equal(t, "naïve café crème brûlée déjà…", ledgerdb.Shorten("naïve café crème brûlée déjà vu à la carte", 30),
		"cut where a word ends")
	require.Equal(t, "a "+strings.Repeat("ü", 27)+"…", ledgerdb.Shorten("a "+strings.Repeat("ü", 40), 29),
		"no word ends in the last third: cut at the limit")
}
