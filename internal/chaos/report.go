package chaos

// The report: what a run did and what the checks found, and its printed summary.

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb"
)

// Report is what a run did and what the checker found.
type Report struct {
	// Seed, Prefix and TaskQueue identify the run.
	Seed      uint64
	Prefix    string
	TaskQueue string
	// Jobs is how many jobs were submitted (orphans not included).
	Jobs int
	// Scenarios counts the jobs by scenario (the input reference without its usage), and
	// Metered how many of them were metered by the GPU-second.
	Scenarios map[string]int
	Metered   int
	// States counts the run's jobs (orphans included) by ledger state at the check.
	States map[ledgerdb.State]int
	// Injections counts what was injected, by kind (the Kind constants).
	Injections map[string]int
	// Orphans and OrphansHealed count the placeholders written on purpose and those that left
	// the submitting state through the reconcile pass.
	Orphans, OrphansHealed int
	// Terminated counts the jobs whose running workflow was terminated, by their ledger state at
	// the check: refunded (healed), or recovered or delivered when their result landed. A
	// terminated job left running was never healed, and is an anomaly.
	Terminated map[ledgerdb.State]int
	// Recorded counts the jobs whose result was reported while the dev server was down, by their
	// ledger state at the check: delivered or recovered once the pass applied the result. Any
	// other state means delivered work went unbilled, and is an anomaly.
	Recorded map[ledgerdb.State]int
	// Reads says whether the driver read jobs through the job service's healing status read.
	Reads bool
	// Passes is what the workers' scheduled reconcile passes did during the run (over every
	// account of the database).
	Passes PassTotals
	// Repaired counts the faults left for the pass (orphans, terminated jobs, recorded results,
	// jobs found running with no workflow) that were repaired, and MostPassesOutlasted the most
	// completed passes that had started after one of them became repairable and left it as it
	// was (at most HealPasses-1 in a clean run).
	Repaired, MostPassesOutlasted int
	// TransientErrors counts calls the driver retried (Temporal or Postgres being restarted).
	TransientErrors int64
	// Anomalies are wrong answers the driver saw: a deleted ID not answering ErrGone, a live
	// resubmission not answering the original, a job that never settled, a terminated job that
	// did not end refunded, delivered or recovered, a recorded result left unbilled, a fault that
	// HealPasses scheduled passes left as it was, a run not at rest within QuiesceTimeout.
	Anomalies []string
	// Credits is what the credit mix did: blocks granted and expired, pending grants settled,
	// top-ups requested and paid, and the run's revenue.
	Credits CreditTotals
	// Violations are the invariant checker's findings, then the credit mix's (the Violation*
	// kinds).
	Violations []invariants.Violation
	// Elapsed is how long the run took.
	Elapsed time.Duration
}

// OK reports a clean run: no violation and no anomaly.
func (r Report) OK() bool { return len(r.Violations) == 0 && len(r.Anomalies) == 0 }

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// writeSummary prints the report's figures.
func writeSummary(out io.Writer, r Report) {
	kinds := make([]string, 0, len(r.Injections))
	for k := range r.Injections {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(out, "\nchaos summary: seed %d, prefix %s, %d jobs + %d orphans, %s\n", r.Seed, r.Prefix, r.Jobs, r.Orphans, r.Elapsed.Round(time.Second))
	for _, k := range kinds {
		fmt.Fprintf(out, "  injected %-17s %d\n", k, r.Injections[k])
	}
	states := make([]string, 0, len(r.States))
	for s, n := range r.States {
		states = append(states, fmt.Sprintf("%s %d", s, n))
	}
	sort.Strings(states)
	fmt.Fprintf(out, "  final states: %s\n", strings.Join(states, ", "))
	fmt.Fprintf(out, "  orphans healed: %d of %d; transient errors retried: %d\n", r.OrphansHealed, r.Orphans, r.TransientErrors)
	terminated, settled := 0, 0
	for state, n := range r.Terminated {
		terminated += n
		if state == ledgerdb.StateRefunded || state == ledgerdb.StateRecovered || state == ledgerdb.StateDelivered {
			settled += n
		}
	}
	fmt.Fprintf(out, "  terminated jobs: %d (refunded %d, recovered %d, delivered %d); left running: %d; not settled: %d\n",
		terminated, r.Terminated[ledgerdb.StateRefunded], r.Terminated[ledgerdb.StateRecovered], r.Terminated[ledgerdb.StateDelivered],
		r.Terminated[ledgerdb.StateRunning], terminated-settled)
	recorded := 0
	for _, n := range r.Recorded {
		recorded += n
	}
	fmt.Fprintf(out, "  results recorded while Temporal was down: %d (recovered %d, delivered %d); not billed: %d\n",
		recorded, r.Recorded[ledgerdb.StateRecovered], r.Recorded[ledgerdb.StateDelivered],
		recorded-r.Recorded[ledgerdb.StateRecovered]-r.Recorded[ledgerdb.StateDelivered])
	healer := "the workers' scheduled pass alone (reads off)"
	if r.Reads {
		healer = "the workers' scheduled pass and the driver's status reads (reads on)"
	}
	fmt.Fprintf(out, "  healed by %s: %d faults repaired, none outlasting more than %d completed passes (bound %d)\n",
		healer, r.Repaired, r.MostPassesOutlasted, HealPasses-1)
	fmt.Fprintf(out, "  scheduled passes: %d completed, %d ended otherwise; results applied %d, jobs healed %d, placeholders started %d, orphans rejected %d\n",
		r.Passes.Completed, r.Passes.Ended, r.Passes.ResultsApplied, r.Passes.Healed, r.Passes.Started, r.Passes.OrphansRejected)
	writeCredits(out, r.Credits)
	for _, a := range r.Anomalies {
		fmt.Fprintf(out, "  anomaly: %s\n", a)
	}
	fmt.Fprintf(out, "  violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(out, "    %s: %s\n", v.Kind, v.Message)
	}
}

// writeCredits prints what the credit mix did.
func writeCredits(out io.Writer, c CreditTotals) {
	fmt.Fprintf(out, "  credit blocks: %d granted; pending grants confirmed %d, voided %d; expired mid-run %d (removed by the pass's expire row, %d credits), %d emptied before their expiry; expire rows caused by returns %d\n",
		c.BlocksGranted, c.PendingConfirmed, c.PendingVoided, c.BlocksExpired, c.CreditsExpired, c.BlocksEmptied, c.ReturnExpiries)
	fmt.Fprintf(out, "  automatic top-ups: %d requested (%d credits), %d paid; grants posted %d, of which %d bought nothing (their key had paid); webhook deliveries received %d\n",
		c.TopUpsRequested, c.TopUpCredits, c.TopUpsPaid, c.TopUpPosts, c.TopUpRepeats, c.Deliveries)
	fmt.Fprintf(out, "  revenue over the run (paid credits): granted %d, recognised %d, lapsed %d\n", c.Granted, c.Recognised, c.Lapsed)
}
