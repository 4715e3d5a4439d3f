package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/plural"
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
	chartWidth, chartHeight = 640.0, 240.0
	chartLeft, chartRight   = 64.0, 24.0
	chartTop, chartBottom   = 28.0, 52.0
	// chartTicks is how many dates the x axis names, the period's ends included.
	chartTicks = 4
)

// drawBalance draws the balance over a period, since to now, as a step line against time: each row
// steps, where it was written (its CreatedAt), to its balance_after; rows written in a burst step at
// one place, as they happened. entries are the period's rows, oldest first; balance is the balance
// now. The line starts at the period's start at the balance before the first row, and runs on to
// now; with no row, it is flat at the balance. complete says whether entries are all of the
// period's rows: when they are only its last ones, the line starts at the first of them, since
// what came before is not drawn. A row's time is its transaction's start, so a row may be dated a
// moment before the one before it: the line never steps back.
func drawBalance(entries []ledgerdb.Entry, since, now time.Time, balance int64, complete bool) chart {
	start := balance
	if len(entries) > 0 {
		start = entries[0].BalanceAfter - entries[0].Amount
	}
	low, high := min(start, 0), max(start, 0)
	for _, e := range entries {
		low, high = min(low, e.BalanceAfter), max(high, e.BalanceAfter)
	}
	if high == low {
		high = low + 1
	}
	span := now.Sub(since)
	x := func(t time.Time) float64 {
		f := float64(t.Sub(since)) / float64(span)
		return chartLeft + (chartWidth-chartLeft-chartRight)*min(1, max(0, f))
	}
	y := func(b int64) float64 {
		return chartTop + (chartHeight-chartTop-chartBottom)*float64(high-b)/float64(high-low)
	}
	from := x(since)
	if !complete && len(entries) > 0 {
		from = x(entries[0].CreatedAt)
	}
	var path strings.Builder
	fmt.Fprintf(&path, "M%.1f %.1f", from, y(start))
	last := from
	for _, e := range entries {
		last = max(last, x(e.CreatedAt))
		fmt.Fprintf(&path, " H%.1f V%.1f", last, y(e.BalanceAfter))
	}
	fmt.Fprintf(&path, " H%.1f", x(now))

	rows := plural.Count(len(entries), "ledger row")
	if !complete {
		rows = "its last " + rows
	}
	summary := fmt.Sprintf("Balance from %s to %s (UTC), drawn against time: %s at the start, %s now, between %d and %s, over %s.",
		longDate(since), longDate(now), plural.Count(start, "credit"), plural.Count(balance, "credit"), low, plural.Count(high, "credit"), rows)

	var svg strings.Builder
	fmt.Fprintf(&svg, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-labelledby="chart-title" xmlns="http://www.w3.org/2000/svg">`,
		chartWidth, chartHeight)
	fmt.Fprintf(&svg, `<title id="chart-title">%s</title>`, template.HTMLEscapeString(summary))
	bottom, right := chartHeight-chartBottom, chartWidth-chartRight
	// The axes and their names, the zero line when it is inside, the credits at the top and the
	// bottom, and a date at each tick.
	fmt.Fprintf(&svg, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, chartLeft, chartTop, chartLeft, bottom)
	fmt.Fprintf(&svg, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, chartLeft, bottom, right, bottom)
	fmt.Fprintf(&svg, `<text class="name" x="%.1f" y="%.1f" text-anchor="end">Credits</text>`, chartLeft-6, chartTop-12)
	fmt.Fprintf(&svg, `<text class="name" x="%.1f" y="%.1f" text-anchor="middle">Date (UTC)</text>`, (chartLeft+right)/2, chartHeight-6)
	if low < 0 {
		fmt.Fprintf(&svg, `<line class="zero" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, chartLeft, y(0), right, y(0))
	}
	fmt.Fprintf(&svg, `<text class="label" x="%.1f" y="%.1f" text-anchor="end">%d</text>`, chartLeft-6, y(high)+4, high)
	fmt.Fprintf(&svg, `<text class="label" x="%.1f" y="%.1f" text-anchor="end">%d</text>`, chartLeft-6, y(low)+4, low)
	for i := range chartTicks {
		at := since.Add(span * time.Duration(i) / (chartTicks - 1))
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case chartTicks - 1:
			anchor = "end"
		}
		fmt.Fprintf(&svg, `<line class="tick" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x(at), bottom, x(at), bottom+5)
		fmt.Fprintf(&svg, `<text class="label" x="%.1f" y="%.1f" text-anchor="%s">%s</text>`, x(at), bottom+20, anchor, at.UTC().Format("2 Jan"))
	}
	fmt.Fprintf(&svg, `<path class="balance" d="%s"/>`, path.String())
	svg.WriteString(`</svg>`)
	// Only numbers, dates and an escaped sentence went in: the markup is the console's own.
	return chart{SVG: template.HTML(svg.String()), Summary: summary} // #nosec G203 -- built from numbers and escaped text
}

// longDate is a day as a person reads it: "2 Nov 2026".
func longDate(t time.Time) string { return t.UTC().Format("2 Jan 2006") }
