package plural_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/plural"
)

// TestCountAgreesWithItsNumber checks the words a count is said in: the singular for one (either
// sign), the plural for every other number, zero included.
func TestCountAgreesWithItsNumber(t *testing.T) {
	require.Equal(t, "1 credit", plural.Count(int64(1), "credit"))
	require.Equal(t, "0 credits", plural.Count(0, "credit"))
	require.Equal(t, "40 credits", plural.Count(int64(40), "credit"))
	require.Equal(t, "-1 credit", plural.Count(-1, "credit"))
	require.Equal(t, "1 GPU-second", plural.Count(int64(1), "GPU-second"))
	require.Equal(t, "2 attempts", plural.Count(2, "attempt"))
	require.Equal(t, "+1 credit", plural.Signed(int64(1), "credit"))
	require.Equal(t, "-40 credits", plural.Signed(int64(-40), "credit"))
	require.Equal(t, "was", plural.Of(int64(1), "was", "were"))
	require.Equal(t, "were", plural.Of(int64(2), "was", "were"))
}
