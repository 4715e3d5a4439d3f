// Package invariants checks the money rules (docs/design.md) across the whole system: the Postgres ledger
// and the Temporal workflows that move its money. [Check] reads both and reports every job and
// account that breaks a rule, or that the two sides disagree about:
//
//   - a job's ledger rows against its state: at most one charge, refund and reclaim, exactly
//     those its guard flags record (the reversing-pairs rule), summing to −cost while it is charged and to 0
//     otherwise (the net-effect rule);
//   - each account's balance against the sum of its rows, also row by row (the sum-of-rows rule),
//     and against its credit blocks less its debt; an account that owes a debt while blocks that
//     have not ended hold credits (a debt is paid by the first credits that reach the account);
//   - each account's revenue against its delivered work: revenue is never recognised for work not
//     delivered;
//   - each account's automatic top-up requests against its rules: only a spend made under a rule
//     asks, and a month's requests never ask past its cap;
//   - placeholders (state submitting) whose workflow never started or closed without charging;
//   - MeteredJob workflows whose ID the ledger never saw;
//   - jobs stuck in submitting or running for longer than their timeouts allow;
//   - an open workflow whose BillingState search attribute disagrees with the ledger;
//   - charged jobs whose workflow closed without settling them, results recorded but never
//     applied, and ledger alarms — what the reconcile pass heals, left unhealed;
//   - deleted refunded jobs whose late result was taken but discarded, their refund never
//     reclaimed (deletion hides a job, never what it owes);
//   - a reconcile schedule that is missing or points at a task queue nobody polls.
//
// It only reads. `jobbill audit` is its command; tests call it, scoped to their own account or
// job-ID prefix, to prove the rules after real jobs ran.
package invariants

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// Kind names what a violation breaks.
type Kind string

// The violation kinds.
const (
	// KindJobEntries: a job has more than one charge, refund or reclaim row, rows its guard flags
	// do not record, or rows booked on another account than its own (the reversing-pairs rule).
	KindJobEntries Kind = "job_entries"
	// KindJobNet: a job's rows do not sum to what its state and settlement say: −(units used ×
	// unit price) for a settled job, its whole hold while charged and unsettled, 0 otherwise
	// (the net-effect rule).
	KindJobNet Kind = "job_net"
	// KindAccountBalance: an account's balance is not the sum of its rows, or a row's
	// balance_after does not continue the running sum (the sum-of-rows rule).
	KindAccountBalance Kind = "account_balance"
	// KindUndeliveredRevenue: the revenue report recognises paid credits of an account for work
	// that was not delivered: more (or less) than its delivered and recovered jobs netted and the
	// debts of delivered work it paid, or credits of a job neither delivered, recovered nor
	// running (docs/design.md, "Statements and revenue": only delivered work is revenue).
	KindUndeliveredRevenue Kind = "undelivered_revenue"
	// KindPlaceholderWithoutWorkflow: a job is still submitting and no workflow will ever decide
	// its charge: none was started under its ID, or it closed without charging.
	KindPlaceholderWithoutWorkflow Kind = "placeholder_without_workflow"
	// KindWorkflowWithoutJob: a MeteredJob workflow runs (or ran) under an ID the ledger never saw,
	// so the job service's placeholder-first rule was bypassed.
	KindWorkflowWithoutJob Kind = "workflow_without_job"
	// KindStuckJob: a job has been submitting or running for longer than its timeouts allow.
	KindStuckJob Kind = "stuck_job"
	// KindBillingStateMismatch: an open workflow's BillingState search attribute is not the job's
	// state in the ledger. Closed runs are not compared: they keep the attributes they closed
	// with, and a job recovered later through the late-result fallback is sound.
	KindBillingStateMismatch Kind = "billing_state_mismatch"
	// KindUnsettledJob: a job is charged and running, but no workflow runs it (its run was
	// terminated, failed, timed out): nothing will deliver or refund it. The reconcile pass heals
	// such a job within an interval, so one older than the grace means the pass is not running
	// (the net-effect rule). A job charged after its run had closed is reported at once: the step
	// that charged it heals it at once.
	KindUnsettledJob Kind = "unsettled_job"
	// KindUnappliedResult: a result was recorded (while Temporal was unreachable) and no workflow
	// has taken it for longer than the grace; the reconcile pass should have applied it.
	KindUnappliedResult Kind = "unapplied_result"
	// KindDiscardedResult: a refunded job was deleted, and a result reported for it was taken but
	// not billed while its refund could still be reclaimed: the customer keeps the refund for
	// delivered work (the net-effect rule: deletion hides a job, never what it owes). Reporting the
	// same result again bills it.
	KindDiscardedResult Kind = "discarded_result"
	// KindForeignWorkflow: an open workflow of another type (another program's) holds a job's
	// workflow ID: it never settles the job, no run of the job's own workflow can start under the
	// ID (a redrive is refused), and healing has to go around it.
	KindForeignWorkflow Kind = "foreign_workflow"
	// KindLedgerAlarm: the ledger refused one of a job's steps for good and the step is still not
	// written, or the job's workflow was sent a result it could not bill and the job is still
	// unsettled: the job needs an operator.
	KindLedgerAlarm Kind = "ledger_alarm"
	// KindReconcileSchedule: the reconcile schedule is missing, or points at a task queue no worker
	// polls, so nothing heals what the doors leave behind.
	KindReconcileSchedule Kind = "reconcile_schedule"
	// KindExpirySchedule: the expiry schedule is missing, or points at a task queue no worker
	// polls, so what remains of expired credit blocks stays in the balances.
	KindExpirySchedule Kind = "expiry_schedule"
	// KindDebtBesideCredits: an account owes a debt while one of its credit blocks that has not
	// ended (spendable, or not started yet) holds credits. A debt is paid by the first credits
	// that reach the account, so those credits should have paid it: the customer is shown
	// credits the debt claims again, and they lapse with their block while the debt stays owed.
	KindDebtBesideCredits Kind = "debt_beside_credits"
	// KindTopUpRequest: an automatic top-up was requested that no spend earned (docs/design.md,
	// "Automatic top-ups"): by a row that is not a spend of the account — a credit, or an expiry a
	// refund or a release caused —, by a spend written when the account had no top-up rule, or
	// taking its month's requests past the cap they were asked within. The product's payment code
	// buys what a request asks: the customer pays for credits they did not ask for.
	KindTopUpRequest Kind = "topup_request"
)

// Kinds lists every kind, in the order a report lists them.
func Kinds() []Kind {
	return []Kind{KindJobEntries, KindJobNet, KindAccountBalance, KindDebtBesideCredits, KindUndeliveredRevenue, KindPlaceholderWithoutWorkflow,
		KindWorkflowWithoutJob, KindStuckJob, KindBillingStateMismatch, KindUnsettledJob, KindUnappliedResult,
		KindDiscardedResult, KindForeignWorkflow, KindLedgerAlarm, KindReconcileSchedule, KindExpirySchedule, KindTopUpRequest}
}

// Violation is one broken rule.
type Violation struct {
	// Kind says what is broken.
	Kind Kind `json:"kind"`
	// Rule is the money rule (docs/design.md) the violation breaks; 0 when it breaks none of the
	// numbered rules: a disagreement between the ledger and Temporal, or a rule of the credit
	// blocks, of revenue or of automatic top-ups (docs/design.md, "Credit blocks", "Statements and
	// revenue", "Automatic top-ups").
	Rule int `json:"rule,omitempty"`
	// JobID is the job (or workflow ID); empty for an account's violation.
	JobID string `json:"job_id,omitempty"`
	// AccountID is the account, when known.
	AccountID string `json:"account_id,omitempty"`
	// Message says what is wrong, in a sentence an operator can act on.
	Message string `json:"message"`
}

// Options says what [Check] reads and how strict it is.
type Options struct {
	// Ledger is the ledger to check. Required.
	Ledger *ledgerdb.Store
	// Temporal is the client to list and describe workflows with. Required.
	Temporal client.Client
	// Namespace is the Temporal namespace; workflows.DefaultNamespace when empty.
	Namespace string
	// TaskQueue, when set, keeps only workflows started on it. Several ledgers (a deployment's and
	// the tests', say) may share one namespace, each with its own task queue; without this, the
	// other ledgers' workflows would all count as workflows without a job row.
	TaskQueue string
	// AccountID, when set, checks only this account and its jobs and workflows.
	AccountID string
	// JobIDPrefix, when set, checks only jobs and workflows whose ID starts with it, and the
	// accounts that own such jobs.
	JobIDPrefix string
	// StuckAfter is how long a job may stay submitting (since its placeholder was written) or
	// running (since it was charged) before it counts as stuck; zero takes
	// StuckAfterFor(workflows.DefaultPolicy()).
	StuckAfter time.Duration
	// Grace is how old a placeholder must be before a missing workflow counts: the job service writes
	// the placeholder first and starts the workflow a moment later, so on a live system a young
	// placeholder without a workflow is normal. It is also how long a charged job may have no
	// workflow, and a recorded result stay unapplied, before the reconcile pass counts as late —
	// except a job charged after its run had closed, which no grace covers. Zero checks everything
	// (quiescent systems and tests).
	Grace time.Duration
	// Schedule, when set, also checks the schedules of the reconcile and expiry passes: that each
	// exists and that a worker polls the task queue it starts its passes on. `jobbill audit` sets it unless the audit is
	// scoped to an account or a prefix.
	Schedule bool
}

// StuckAfterFor is the longest a job may legitimately stay running under policy p: every attempt
// running to its StartToClose timeout, the backoff between them, and a quarter more for the
// ledger steps and a busy worker. Beyond it the workflow should have delivered or refunded.
func StuckAfterFor(p workflows.Policy) time.Duration {
	p = p.WithDefaults()
	total := time.Duration(p.MaximumAttempts) * p.StartToClose
	interval := p.InitialInterval
	for i := int32(1); i < p.MaximumAttempts; i++ {
		total += min(interval, p.MaximumInterval)
		interval = time.Duration(float64(interval) * p.BackoffCoefficient)
	}
	return total + total/4
}

// Check reads the ledger and Temporal and reports every violation in scope. An error means the
// check could not run (a database or Temporal call failed), not that a rule is broken.
func Check(ctx context.Context, opts Options) (Report, error) {
	if opts.Ledger == nil || opts.Temporal == nil {
		return Report{}, errors.New("invariants: Options.Ledger and Options.Temporal are required")
	}
	if opts.Namespace == "" {
		opts.Namespace = workflows.DefaultNamespace
	}
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = StuckAfterFor(workflows.DefaultPolicy())
	}
	if strings.ContainsAny(opts.TaskQueue, `'"\`) {
		// It is quoted into a visibility query.
		return Report{}, fmt.Errorf("invariants: task queue %q: quotes and backslashes are not allowed", opts.TaskQueue)
	}
	snap, err := opts.Ledger.LedgerSnapshot(ctx, ledgerdb.SnapshotScope{AccountID: opts.AccountID, JobIDPrefix: opts.JobIDPrefix})
	if err != nil {
		return Report{}, err
	}
	report := newReport(opts, snap)
	report.Violations = append(report.Violations, CheckLedger(snap)...)

	// The workflows are read after the ledger: a job submitted meanwhile then has a workflow but
	// no row in the snapshot, and the per-ID lookup in checkWorkflowsWithoutJob finds it.
	c := &temporalCheck{opts: opts, snap: snap, report: &report}
	if err := c.run(ctx); err != nil {
		return Report{}, err
	}
	report.sort()
	return report, nil
}

// CheckLedger checks the reversing-pairs, net-effect and sum-of-rows rules, the revenue rule, and
// that every automatic top-up request was earned by a spend, on a ledger snapshot alone; [Check]
// calls it. It takes the rows as input so that a test can check it on a snapshot read inside a
// transaction it rolls back, or on rows the database would never accept (two charges of one job).
func CheckLedger(snap ledgerdb.LedgerSnapshot) []Violation {
	var out []Violation
	for _, a := range snap.Accounts {
		if a.Balance != a.EntrySum {
			out = append(out, Violation{Kind: KindAccountBalance, Rule: 6, AccountID: a.AccountID,
				Message: fmt.Sprintf("account %s: balance is %d but its %d ledger rows sum to %d (off by %+d).",
					a.AccountID, a.Balance, a.Entries, a.EntrySum, a.Balance-a.EntrySum)})
		}
		if a.AwaitingReclaim != a.RefundedCosts {
			out = append(out, Violation{Kind: KindAccountBalance, Rule: 6, AccountID: a.AccountID,
				Message: fmt.Sprintf("account %s: it records %d credits of refunds awaiting a possible reclaim, but its refunded jobs cost %d; the exposure bound that keeps every reclaim inside a balance rests on that record.",
					a.AccountID, a.AwaitingReclaim, a.RefundedCosts)})
		}
		if a.Balance != a.BlocksHeld-a.Debt || a.Debt < 0 || a.BlocksOff > 0 {
			out = append(out, Violation{Kind: KindAccountBalance, Rule: 6, AccountID: a.AccountID,
				Message: fmt.Sprintf("account %s: its credit blocks hold %d and its debt is %d, but its balance is %d; %d of its blocks do not hold what their moves add up to.",
					a.AccountID, a.BlocksHeld, a.Debt, a.Balance, a.BlocksOff)})
		}
		if a.Debt > 0 && a.UnendedHeld > 0 {
			out = append(out, Violation{Kind: KindDebtBesideCredits, AccountID: a.AccountID,
				Message: fmt.Sprintf("account %s: it owes a debt of %d while its credit blocks that have not ended hold %d credits; a debt is paid by the first credits that reach the account, so those credits should have paid it (the customer is shown them, and they lapse with their block while the debt stays owed).",
					a.AccountID, a.Debt, a.UnendedHeld)})
		}
		if problem := a.Revenue.Problem(); problem != "" {
			out = append(out, Violation{Kind: KindUndeliveredRevenue, AccountID: a.AccountID,
				Message: fmt.Sprintf("account %s: %s.", a.AccountID, problem)})
		}
		if a.ChainBreaks > 0 {
			out = append(out, Violation{Kind: KindAccountBalance, Rule: 6, AccountID: a.AccountID,
				Message: fmt.Sprintf("account %s: %d ledger rows have a balance_after that is not the running sum of the rows before them (first: row %d), so the balance did not equal the sum of the rows when they committed.",
					a.AccountID, a.ChainBreaks, a.FirstChainBreak)})
		}
		for _, p := range a.TopUpProblems {
			out = append(out, Violation{Kind: KindTopUpRequest, AccountID: a.AccountID,
				Message: fmt.Sprintf("account %s: %s.", a.AccountID, p)})
		}
	}
	for _, t := range snap.Jobs {
		j := t.Job
		rows := map[ledgerdb.EntryKind]int{
			ledgerdb.KindCharge: t.Charges, ledgerdb.KindRefund: t.Refunds,
			ledgerdb.KindReclaim: t.Reclaims, ledgerdb.KindRelease: t.Releases,
		}
		for _, kind := range []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim, ledgerdb.KindRelease} {
			want := j.WantsRows()[kind]
			switch {
			case rows[kind] > 1:
				out = append(out, Violation{Kind: KindJobEntries, Rule: 2, JobID: j.ID, AccountID: j.AccountID,
					Message: fmt.Sprintf("job %s (%s, hold %d) has %d %s rows; a job has at most one.", j.ID, j.State, j.Cost, rows[kind], kind)})
			case rows[kind] != want:
				out = append(out, Violation{Kind: KindJobEntries, Rule: 2, JobID: j.ID, AccountID: j.AccountID,
					Message: fmt.Sprintf("job %s (%s, hold %d) has %d %s rows but its guard flags and settlement say %d.", j.ID, j.State, j.Cost, rows[kind], kind, want)})
			}
		}
		if t.ForeignEntries > 0 {
			out = append(out, Violation{Kind: KindJobEntries, Rule: 2, JobID: j.ID, AccountID: j.AccountID,
				Message: fmt.Sprintf("job %s has %d ledger rows booked on another account than its own (%s).", j.ID, t.ForeignEntries, j.AccountID)})
		}
		if step, open := openAlarm(t); open {
			what := fmt.Sprintf("the ledger refused its %s for good and it is still not written; an operator must repair it", step)
			if step == ledgerdb.AlarmUnbillableResult {
				what = "a result signal for it could not be billed and it is still unsettled: its work may have been delivered " +
					"unbilled; an operator must find the result and report it again"
			}
			out = append(out, Violation{Kind: KindLedgerAlarm, Rule: 3, JobID: j.ID, AccountID: j.AccountID,
				Message: fmt.Sprintf("job %s (%s): %s (%s).", j.ID, describeState(j), what, strings.Join(t.Alarms, "; "))})
		}
		if t.EntrySum != j.Net() {
			out = append(out, Violation{Kind: KindJobNet, Rule: 3, JobID: j.ID, AccountID: j.AccountID,
				Message: fmt.Sprintf("job %s (%s, hold %d%s): its ledger rows sum to %d, but its state and settlement say %d (%s).",
					j.ID, describeState(j), j.Cost, usageNote(j), t.EntrySum, j.Net(), j.MoneyState())})
		}
	}
	return out
}

// usageNote says, for a settled job, the usage its net follows from: ", 137 units used at 1".
func usageNote(j ledgerdb.Job) string {
	if !j.IsSettled {
		return ""
	}
	return fmt.Sprintf(", %d units used at %d", *j.UnitsUsed, j.UnitPrice)
}

// openAlarm says whether one of the job's alarms names a step that is still not written: the job
// is still in a state that step moves it from. An unbillable result's alarm is open while the job
// could still take a result: until a result settles it.
func openAlarm(t ledgerdb.JobTotals) (string, bool) {
	pending := map[string][]ledgerdb.State{
		"charge":                       {ledgerdb.StateSubmitting},
		"refund":                       {ledgerdb.StateRunning},
		"settle":                       {ledgerdb.StateRunning, ledgerdb.StateRefunded},
		"reclaim":                      {ledgerdb.StateRefunded},
		ledgerdb.AlarmUnbillableResult: {ledgerdb.StateRunning, ledgerdb.StateRefunded},
	}
	for _, alarm := range t.Alarms {
		step, _, _ := strings.Cut(alarm, ":")
		if slices.Contains(pending[step], t.Job.State) {
			return step, true
		}
	}
	return "", false
}

// describeState names a job's state, with the state a tombstone was deleted from.
func describeState(j ledgerdb.Job) string {
	if j.State == ledgerdb.StateDeleted {
		return fmt.Sprintf("deleted from %s", j.StateBeforeDelete)
	}
	return string(j.State)
}

// sort orders violations by kind (in [Kinds] order), then account, then job, so that two runs
// over the same data print the same report.
func (r *Report) sort() {
	rank := map[Kind]int{}
	for i, k := range Kinds() {
		rank[k] = i
	}
	slices.SortStableFunc(r.Violations, func(a, b Violation) int {
		if d := rank[a.Kind] - rank[b.Kind]; d != 0 {
			return d
		}
		if c := strings.Compare(a.AccountID, b.AccountID); c != 0 {
			return c
		}
		return strings.Compare(a.JobID, b.JobID)
	})
	r.Counts.ByKind = map[Kind]int{}
	for _, v := range r.Violations {
		r.Counts.ByKind[v.Kind]++
	}
	r.Counts.Violations = len(r.Violations)
}
