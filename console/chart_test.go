package console

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
)

// TestChartDrawsBalanceAgainstTime checks the account page's picture of the balance: a step line
// against time, each row's step where the row was written — two rows a second apart step at one
// place, a row written on the 29th day of 30 steps 29/30 of the way — its x axis labelled with
// dates and named as UTC dates, its y axis with credits; and the same in words. The line starts at
// the period's start at the balance before its first row, and ends now at the balance now.
func TestChartDrawsBalanceAgainstTime(t *testing.T) {
	since := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	now := since.AddDate(0, 0, 30)
	day := 24 * time.Hour
	entries := []ledgerdb.Entry{
		{ID: 1, Amount: 100, BalanceAfter: 100, CreatedAt: since.Add(day)},
		{ID: 2, Amount: -40, BalanceAfter: 60, CreatedAt: since.Add(day + time.Second)},
		{ID: 3, Amount: 40, BalanceAfter: 100, CreatedAt: since.Add(29 * day)},
	}
	c := drawBalance(entries, since, now, 100, true)
	svg := string(c.SVG)

	path := regexp.MustCompile(`<path class="balance" d="([^"]+)"/>`).FindStringSubmatch(svg)
	require.NotNil(t, path, svg)
	var xs []float64
	for _, m := range regexp.MustCompile(`H([0-9.]+)`).FindAllStringSubmatch(path[1], -1) {
		x, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		xs = append(xs, x)
	}
	require.Len(t, xs, 4, "one step per row, then on to now: %s", path[1])
	plot := chartWidth - chartLeft - chartRight
	at := func(tm time.Time) float64 { return chartLeft + plot*float64(tm.Sub(since))/float64(now.Sub(since)) }
	require.True(t, strings.HasPrefix(path[1], "M"+strconv.FormatFloat(chartLeft, 'f', 1, 64)+" "), "the line starts at the period's start: %s", path[1])
	require.InDelta(t, at(since.Add(day)), xs[0], 0.1, "the first row steps where it was written")
	require.InDelta(t, xs[0], xs[1], 0.1, "two rows a second apart step at one place")
	require.InDelta(t, at(since.Add(29*day)), xs[2], 0.1, "a row of the 29th day of 30 steps 29/30 of the way")
	require.InDelta(t, chartLeft+plot, xs[3], 0.1, "the line runs on to now")

	for _, label := range []string{">2 Nov<", ">12 Nov<", ">22 Nov<", ">2 Dec<", ">Date (UTC)<", ">Credits<", ">100<", ">0<"} {
		require.Contains(t, svg, label)
	}
	require.Equal(t, "Balance from 2 Nov 2026 to 2 Dec 2026 (UTC), drawn against time: 0 credits at the start, "+
		"100 credits now, between 0 and 100 credits, over 3 ledger rows.", c.Summary)
}

// TestChartOfOneRowSaysOne checks the chart's words for one row and one credit: singular.
func TestChartOfOneRowSaysOne(t *testing.T) {
	since := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	c := drawBalance([]ledgerdb.Entry{{ID: 1, Amount: 1, BalanceAfter: 1, CreatedAt: since.Add(time.Hour)}},
		since, since.AddDate(0, 0, 30), 1, true)
	require.Contains(t, c.Summary, "1 credit now, between 0 and 1 credit, over 1 ledger row.")
}
