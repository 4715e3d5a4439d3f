package jobs

import (
	"fmt"

	"github.com/jobbill/jobbill/ledgerdb"
)

// RowText says in words what one of a job's ledger rows did to its user's money, from the same
// fixed vocabulary as [Message]: the job's figures and its reason's text ([ledgerdb.Reason.Text]),
// never words from outside. A job's rows read in order tell its money's story:
//
//	Charged the 300-credit hold (300 GPU-seconds at 1 credit each).
//	Refunded: the work did not finish in time.
//	The result arrived late: the refund was taken back.
//	137 of 300 GPU-seconds used: 163 credits returned.
func RowText(job ledgerdb.Job, e ledgerdb.Entry) string {
	switch e.Kind {
	case ledgerdb.KindCharge:
		if job.Unit == ledgerdb.UnitGPUSecond {
			return fmt.Sprintf("Charged the %d-credit hold (%d GPU-seconds at %d credits each); the seconds not used are returned.",
				-e.Amount, job.HeldUnits, job.UnitPrice)
		}
		return fmt.Sprintf("Charged %d credits for the job.", -e.Amount)
	case ledgerdb.KindRefund:
		return fmt.Sprintf("Refunded %d credits: %s.", e.Amount, job.RefundReason.Text())
	case ledgerdb.KindReclaim:
		return fmt.Sprintf("The result arrived late: the refund was taken back (%d credits).", -e.Amount)
	case ledgerdb.KindRelease:
		if job.UnitsUsed != nil {
			return fmt.Sprintf("%d of %d GPU-seconds used: %d credits returned.", *job.UnitsUsed, job.HeldUnits, e.Amount)
		}
		return fmt.Sprintf("The unused part of the hold was returned: %d credits.", e.Amount)
	case ledgerdb.KindGrant:
		return fmt.Sprintf("Credits granted: %d.", e.Amount)
	case ledgerdb.KindAdjustment:
		return fmt.Sprintf("Adjusted by an operator: %+d credits.", e.Amount)
	}
	return fmt.Sprintf("%s of %+d credits.", e.Kind, e.Amount)
}
