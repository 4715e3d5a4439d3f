package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
)

// chart is a picture of the balance over a period: SVG drawn on the server from the ledger's
// rows, so it needs no script, and a sentence that says the same for whoever cannot see it.
type chart struct {
	// SVG is the picture.
	SVG template.HTML
	// Summary says in words what it shows.
	Summary string
}

// The chart's size and margins, in SVG user units; it scales to its box.
const (
	chartWidth, chartHeight = 640.0, 220.0
	chartLeft, chartRight   = 64.0, 16.0
	chartTop, chartBottom   = 16.0, 32.0
)

// drawBalance draws the balance over the period's rows as a step line: one equal step per row,
// oldest on the left, each to the row's balance_after — rows written in a burst stay as readable as
// rows a week apart; the axis gives the first and the last row's dates. entries are the period's
// rows, oldest first; balance is the balance now. With no row in the period, the line is flat at
// the balance.
func drawBalance(entries []ledgerdb.Entry, since, now time.Time, balance int64) chart {
	start := balance
	first, last := since, now
	if len(entries) > 0 {
		start = entries[0].BalanceAfter - entries[0].Amount
		first, last = entries[0].CreatedAt, entries[len(entries)-1].CreatedAt
	}
	low, high := min(start, 0), max(start, 0)
	for _, e := range entries {
		low, high = min(low, e.BalanceAfter), max(high, e.BalanceAfter)
	}
	if high == low {
		high = low + 1
	}
	steps := float64(len(entries) + 1)
	x := func(i int) float64 {
		return chartLeft + (chartWidth-chartLeft-chartRight)*float64(i)/steps
	}
	y := func(b int64) float64 {
		return chartTop + (chartHeight-chartTop-chartBottom)*float64(high-b)/float64(high-low)
	}
	var path strings.Builder
	fmt.Fprintf(&path, "M%.1f %.1f", x(0), y(start))
	for i, e := range entries {
		fmt.Fprintf(&path, " H%.1f V%.1f", x(i+1), y(e.BalanceAfter))
	}
	fmt.Fprintf(&path, " H%.1f", x(len(entries)+1))

	summary := fmt.Sprintf("Balance over the %d ledger rows from %s to %s, one step per row: %d credits before them, %d now, between %d and %d.",
		len(entries), first.UTC().Format(time.DateOnly), last.UTC().Format(time.DateOnly), start, balance, low, high)
	var svg strings.Builder
	fmt.Fprintf(&svg, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-labelledby="chart-title" xmlns="http://www.w3.org/2000/svg">`,
		chartWidth, chartHeight)
	fmt.Fprintf(&svg, `<title id="chart-title">%s</title>`, template.HTMLEscapeString(summary))
	// The axes, the zero line when it is inside, and the labels.
	fmt.Fprintf(&svg, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, chartLeft, chartTop, chartLeft, chartHeight-chartBottom)
	fmt.Fprintf(&svg, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, chartLeft, chartHeight-chartBottom, chartWidth-chartRight, chartHeight-chartBottom)
	if low < 0 {
		fmt.Fprintf(&svg, `<line class="zero" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, chartLeft, y(0), chartWidth-chartRight, y(0))
	}
	fmt.Fprintf(&svg, `<text class="label" x="%.1f" y="%.1f" text-anchor="end">%d</text>`, chartLeft-6, y(high)+4, high)
	fmt.Fprintf(&svg, `<text class="label" x="%.1f" y="%.1f" text-anchor="end">%d</text>`, chartLeft-6, y(low)+4, low)
	fmt.Fprintf(&svg, `<text class="label" x="%.1f" y="%.1f">%s</text>`, chartLeft, chartHeight-10, first.UTC().Format(time.DateOnly))
	fmt.Fprintf(&svg, `<text class="label" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, chartWidth-chartRight, chartHeight-10, last.UTC().Format(time.DateOnly))
	fmt.Fprintf(&svg, `<path class="balance" d="%s"/>`, path.String())
	svg.WriteString(`</svg>`)
	// Only numbers, dates and an escaped sentence went in: the markup is the console's own.
	return chart{SVG: template.HTML(svg.String()), Summary: summary} // #nosec G203 -- built from numbers and escaped text
}
