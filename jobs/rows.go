package jobs

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/plural"
)

// RowText says in words what one of a job's ledger rows did to its user's money, from the same
// fixed vocabulary as [Message]: the job's figures and its reason's text ([ledgerdb.Reason.Text]),
// never words from outside. A job's rows read in order tell its money's story:
//
//	Charged the 300-credit hold (300 GPU-seconds at 1 credit each); the seconds not used are returned.
//	Refunded: the work did not finish in time.
//	The result arrived late: the refund was taken back.
//	137 of 300 GPU-seconds used: 163 credits returned.
//
// An expiry a refund or a release caused (among a job's rows, [ledgerdb.Store.JobEntries]) says
// what of the credits returned had expired, and where they went back to:
//
//	15 of the credits returned had expired on 31 Dec 2026 and were removed (block 7, promotional, granted 1 Dec 2026).
func RowText(job ledgerdb.Job, e ledgerdb.Entry) string {
	switch e.Kind {
	case ledgerdb.KindCharge:
		if job.Unit == ledgerdb.UnitGPUSecond {
			return fmt.Sprintf("Charged the %d-credit hold (%s at %s each); the seconds not used are returned.",
				-e.Amount, plural.Count(job.HeldUnits, "GPU-second"), plural.Count(job.UnitPrice, "credit"))
		}
		return fmt.Sprintf("Charged %s for the job.", plural.Count(-e.Amount, "credit"))
	case ledgerdb.KindRefund:
		return fmt.Sprintf("Refunded %s: %s.", plural.Count(e.Amount, "credit"), job.RefundReason.Text())
	case ledgerdb.KindReclaim:
		return fmt.Sprintf("The result arrived late: the refund was taken back (%s).", plural.Count(-e.Amount, "credit"))
	case ledgerdb.KindRelease:
		if job.UnitsUsed != nil {
			return fmt.Sprintf("%d of %s used: %s returned.", *job.UnitsUsed, plural.Count(job.HeldUnits, "GPU-second"),
				plural.Count(e.Amount, "credit"))
		}
		return fmt.Sprintf("The unused part of the hold was returned: %s.", plural.Count(e.Amount, "credit"))
	case ledgerdb.KindGrant:
		return fmt.Sprintf("Credits granted: %d.", e.Amount)
	case ledgerdb.KindAdjustment:
		return fmt.Sprintf("Adjusted by an operator: %s.", plural.Signed(e.Amount, "credit"))
	case ledgerdb.KindExpire:
		if e.Block == nil {
			return fmt.Sprintf("%s expired.", plural.Count(-e.Amount, "credit"))
		}
		if e.CausedBy != 0 || e.Block.ExpiresAt == nil {
			return fmt.Sprintf("%d of the credits returned %s and %s removed (block %d, %s, granted %s).",
				-e.Amount, hadExpired([]ledgerdb.Entry{e}), plural.Of(-e.Amount, "was", "were"), e.Block.ID, e.Block.Category, day(e.Block.GrantedAt))
		}
		return fmt.Sprintf("%s expired: block %d (%s, granted %s) ended on %s.",
			plural.Count(-e.Amount, "credit"), e.Block.ID, e.Block.Category, day(e.Block.GrantedAt), day(*e.Block.ExpiresAt))
	}
	return fmt.Sprintf("%s of %s.", e.Kind, plural.Signed(e.Amount, "credit"))
}

// ExpiredText says what of the credits a job's refund or release returned had expired and were
// removed at once, from the expiries they caused ([ledgerdb.Store.ExpiredReturns]): "15 of them
// had expired on 31 Dec 2026 and were removed". Empty when none had.
func ExpiredText(expired []ledgerdb.Entry) string {
	if removed(expired) == 0 {
		return ""
	}
	n := removed(expired)
	return fmt.Sprintf("%d of them %s and %s removed", n, hadExpired(expired), plural.Of(n, "was", "were"))
}

// returnedExpiredText is ExpiredText as a sentence of its own, after a job's sentence: "15 of the
// credits returned had expired on 31 Dec 2026 and were removed." Empty when none had.
func returnedExpiredText(expired []ledgerdb.Entry) string {
	if removed(expired) == 0 {
		return ""
	}
	n := removed(expired)
	return fmt.Sprintf("%d of the credits returned %s and %s removed.", n, hadExpired(expired), plural.Of(n, "was", "were"))
}

// removed is the credits the expiries removed.
func removed(expired []ledgerdb.Entry) int64 {
	var n int64
	for _, e := range expired {
		n -= e.Amount
	}
	return n
}

// hadExpired says when the blocks of the expiries had expired: "had expired on 31 Dec 2026", or
// on each of their days.
func hadExpired(expired []ledgerdb.Entry) string {
	var days []string
	for _, e := range expired {
		if e.Block != nil && e.Block.ExpiresAt != nil {
			if d := day(*e.Block.ExpiresAt); !slices.Contains(days, d) {
				days = append(days, d)
			}
		}
	}
	switch len(days) {
	case 0:
		return "had expired"
	case 1:
		return "had expired on " + days[0]
	}
	return "had expired on " + strings.Join(days[:len(days)-1], ", ") + " and " + days[len(days)-1]
}

// day is a date as a customer reads it, in UTC: "31 Dec 2026".
func day(t time.Time) string { return t.UTC().Format("2 Jan 2006") }
