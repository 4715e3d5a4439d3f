package invariants

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
)

// Report is what [Check] found.
type Report struct {
	// AsOf is the database's clock when the ledger snapshot was taken.
	AsOf time.Time
	// Scope is what was checked.
	Scope Scope
	// Counts says how much was checked and how much was wrong.
	Counts Counts
	// Violations are the broken rules, ordered by kind, account and job; empty when all is well.
	Violations []Violation
}

// Scope is what a check covered and how strict it was.
type Scope struct {
	// AccountID is the one account checked; empty for every account.
	AccountID string `json:"account_id,omitempty"`
	// JobIDPrefix limits the jobs and workflows checked; empty for all.
	JobIDPrefix string `json:"job_id_prefix,omitempty"`
	// Namespace is the Temporal namespace read.
	Namespace string `json:"namespace"`
	// TaskQueue limits the workflows listed; empty for every task queue.
	TaskQueue string `json:"task_queue,omitempty"`
	// StuckAfter is how long a job may stay submitting or running.
	StuckAfter time.Duration `json:"-"`
	// Grace is how old a placeholder must be before a missing workflow counts.
	Grace time.Duration `json:"-"`
}

// MarshalJSON spells the durations as Go does ("1h0m0s"), which a person reads and
// time.ParseDuration reads back.
func (s Scope) MarshalJSON() ([]byte, error) {
	type plain Scope
	return json.Marshal(struct {
		plain
		StuckAfter string `json:"stuck_after"`
		Grace      string `json:"grace"`
	}{plain(s), s.StuckAfter.String(), s.Grace.String()})
}

// Counts says how much a check read and found.
type Counts struct {
	// Accounts is how many accounts were checked.
	Accounts int `json:"accounts"`
	// Jobs is how many jobs were checked; JobsByState splits them by ledger state.
	Jobs        int                    `json:"jobs"`
	JobsByState map[ledgerdb.State]int `json:"jobs_by_state"`
	// Workflows is how many MeteredJob workflow IDs were listed; OpenWorkflows how many are open.
	Workflows     int `json:"workflows"`
	OpenWorkflows int `json:"open_workflows"`
	// Violations is len(Report.Violations); ByKind splits it by kind.
	Violations int          `json:"violations"`
	ByKind     map[Kind]int `json:"violations_by_kind"`
}

func newReport(opts Options, snap ledgerdb.LedgerSnapshot) Report {
	r := Report{
		AsOf: snap.AsOf,
		Scope: Scope{AccountID: opts.AccountID, JobIDPrefix: opts.JobIDPrefix, Namespace: opts.Namespace,
			TaskQueue: opts.TaskQueue, StuckAfter: opts.StuckAfter, Grace: opts.Grace},
		Counts: Counts{Accounts: len(snap.Accounts), Jobs: len(snap.Jobs), JobsByState: map[ledgerdb.State]int{},
			ByKind: map[Kind]int{}},
		Violations: []Violation{},
	}
	for _, t := range snap.Jobs {
		r.Counts.JobsByState[t.Job.State]++
	}
	return r
}

func (r *Report) add(v Violation) { r.Violations = append(r.Violations, v) }

// OK reports whether the check found no violation.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Of returns the violations of one kind.
func (r Report) Of(kind Kind) []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if v.Kind == kind {
			out = append(out, v)
		}
	}
	return out
}

// MarshalJSON writes the report with "ok" first, for scripts that only want the verdict.
func (r Report) MarshalJSON() ([]byte, error) {
	violations := r.Violations
	if violations == nil {
		violations = []Violation{}
	}
	return json.Marshal(struct {
		OK         bool        `json:"ok"`
		AsOf       time.Time   `json:"as_of"`
		Scope      Scope       `json:"scope"`
		Counts     Counts      `json:"counts"`
		Violations []Violation `json:"violations"`
	}{r.OK(), r.AsOf, r.Scope, r.Counts, violations})
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a person: what was checked, then one line per violation, then
// the verdict.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	scope := []string{"namespace " + r.Scope.Namespace}
	if r.Scope.TaskQueue != "" {
		scope = append(scope, "task queue "+r.Scope.TaskQueue)
	} else {
		scope = append(scope, "every task queue")
	}
	if r.Scope.AccountID != "" {
		scope = append(scope, "account "+r.Scope.AccountID)
	}
	if r.Scope.JobIDPrefix != "" {
		scope = append(scope, "job IDs starting "+r.Scope.JobIDPrefix)
	}
	fmt.Fprintf(&b, "audit as of %s: %s; stuck after %s, placeholder grace %s\n",
		r.AsOf.UTC().Format(time.RFC3339), strings.Join(scope, ", "), r.Scope.StuckAfter, r.Scope.Grace)
	fmt.Fprintf(&b, "checked %s, %s%s, %s (%d open)\n", plural(r.Counts.Accounts, "account"),
		plural(r.Counts.Jobs, "job"), byState(r.Counts.JobsByState), plural(r.Counts.Workflows, "workflow"), r.Counts.OpenWorkflows)
	if r.OK() {
		b.WriteString("OK: no violations\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tRULE\tACCOUNT\tJOB\tWHAT")
	for _, v := range r.Violations {
		rule := "-"
		if v.Rule != 0 {
			rule = fmt.Sprint(v.Rule)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Kind, rule, dash(v.AccountID), dash(v.JobID), v.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var kinds []string
	for _, k := range Kinds() {
		if n := r.Counts.ByKind[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
		}
	}
	_, err := fmt.Fprintf(w, "FAILED: %s (%s)\n", plural(len(r.Violations), "violation"), strings.Join(kinds, ", "))
	return err
}

// plural is "1 job" or "2 jobs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// byState is " (delivered 3, refunded 1)", states in the order of the state table (docs/design.md).
func byState(m map[ledgerdb.State]int) string {
	order := []ledgerdb.State{ledgerdb.StateSubmitting, ledgerdb.StateRejected, ledgerdb.StateRunning,
		ledgerdb.StateDelivered, ledgerdb.StateRefunded, ledgerdb.StateRecovered, ledgerdb.StateDeleted}
	var parts []string
	for _, s := range order {
		if n := m[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	for s, n := range m {
		if !slices.Contains(order, s) {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
