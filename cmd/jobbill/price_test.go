package main

// The price commands, black-box (see cliEnv).

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
)

// TestPriceCommands checks `jobbill price set/list/history` (the price-list rule: the price list,
// set by an operator, prices every job): a new price is version 1, the same figures again write
// nothing, a change is version 2; bad input — an unknown unit, no maximum for a metered kind, a
// fixed kind holding 2, a zero unit price, a malformed kind — fails with a clear error naming the
// flag and writes nothing; list shows each kind's current version, history every version, and an
// unknown kind is an error.
func TestPriceCommands(t *testing.T) {
	e := newCLIEnv(t)
	kind := cliKind(t, "transcribe")

	out := e.ok(t, "price", "set", kind, "--unit", "gpu_second", "--unit-price", "2", "--max-units", "300", "--memo", "launch")
	require.Contains(t, out, "version 1 set: 2 credits per GPU-second, at most 300 GPU-seconds per job (a job holds up to 600 credits) (applied)")
	out = e.ok(t, "price", "set", kind, "--unit", "gpu_second", "--unit-price", "2", "--max-units", "300")
	require.Contains(t, out, "version 1 already says")
	require.Contains(t, out, "nothing was written (already_applied)")
	out = e.ok(t, "price", "set", kind, "--unit", "gpu_second", "--unit-price", "3", "--max-units", "300", "--memo", "new GPUs")
	require.Contains(t, out, "version 2 set")
	one := cliKind(t, "one")
	out = e.ok(t, "price", "set", one, "--unit", "gpu_second", "--unit-price", "1", "--max-units", "1")
	require.Contains(t, out, "version 1 set: 1 credit per GPU-second, at most 1 GPU-second per job (a job holds up to 1 credit) (applied)",
		"the words agree with their numbers")
	out = e.ok(t, "price", "set", one, "--unit", "job", "--unit-price", "1")
	require.Contains(t, out, "version 2 set: 1 credit per job")

	bad := cliKind(t, "bad")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--unit", "hour", "--unit-price", "2"}, `--unit is "hour"`},
		{[]string{"--unit", "gpu_second", "--unit-price", "2"}, "--max-units is required for --unit gpu_second"},
		{[]string{"--unit", "job", "--unit-price", "40", "--max-units", "2"}, "--max-units is 2; a kind sold by the job holds exactly 1"},
		{[]string{"--unit", "job", "--unit-price", "0"}, "--unit-price is 0"},
		{[]string{"--unit", "gpu_second", "--unit-price", "1000000000000000", "--max-units", "2"}, "--unit-price"},
		{[]string{"--unit-price", "40"}, `required flag(s) "unit" not set`},
	} {
		out, err := e.run(t, append([]string{"price", "set", bad}, tc.args...)...)
		require.Error(t, err, "price set %v:\n%s", tc.args, out)
		require.Contains(t, err.Error(), tc.says)
	}
	_, err := e.run(t, "price", "set", "Render-4K", "--unit", "job", "--unit-price", "40")
	require.ErrorContains(t, err, "KIND")
	_, err = e.run(t, "price", "history", bad)
	require.ErrorContains(t, err, `unknown kind "`+bad+`": no price was ever set for it`, "no refused price was written")

	out = e.ok(t, "price", "list")
	require.Contains(t, out, "KIND")
	require.Regexp(t, kind+`\s+2\s+gpu_second\s+3\s+300\s+900\s`, out)
	var list []ledgerdb.Price
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "price", "list", "--json")), &list))
	var listed *ledgerdb.Price
	for i := range list {
		if list[i].Kind == kind {
			listed = &list[i]
		}
	}
	require.NotNil(t, listed)
	require.Equal(t, 2, listed.Version, "the list shows the current version")
	require.Equal(t, int64(3), listed.UnitPrice)

	out = e.ok(t, "price", "history", kind)
	require.Regexp(t, `(?m)^1\s+gpu_second\s+2\s+300\s+600\s.*launch$`, out)
	require.Regexp(t, `(?m)^2\s+gpu_second\s+3\s+300\s+900\s.*new GPUs$`, out)
	var history []ledgerdb.Price
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "price", "history", kind, "--json")), &history))
	require.Len(t, history, 2)
}
