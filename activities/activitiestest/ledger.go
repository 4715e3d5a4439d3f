// Package activitiestest provides an in-memory [activities.Ledger] for tests of the activities,
// the workflow and the job service. It follows the guards of ledgerdb's SQL functions (one flag from
// false to true, a WHERE on the current state) closely enough that a test can check the money
// rules, and it can lose an answer after committing, as a dropped connection does. Like the real
// ledger it names a job by its [ledgerdb.JobKey]: job IDs belong to their account, so two accounts
// may hold jobs of the same ID, and neither is reachable through the other's key.
package activitiestest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
)

var _ activities.Ledger = (*MemoryLedger)(nil)

// Operation names, as recorded in [Call.Op] and passed to [MemoryLedger.LoseAnswers].
const (
	OpSubmit        = "Submit"
	OpCharge        = "Charge"
	OpRefund        = "Refund"
	OpReclaim       = "Reclaim"
	OpDeliver       = "Deliver"
	OpSettle        = "Settle"
	OpRecordAttempt = "RecordAttempt"
	OpRaiseAlarm    = "RaiseAlarm"
)

// ErrAnswerLost is returned by a call whose change was committed but whose answer was "lost",
// as when the connection drops after COMMIT. The caller cannot tell it from a failed call and
// retries; the guard makes the retry answer AlreadyApplied.
var ErrAnswerLost = errors.New("connection lost after commit")

// Call is one call the ledger received and what it answered.
type Call struct {
	// Op is the method called (OpCharge, ...).
	Op string
	// Job is the job it named.
	Job ledgerdb.JobKey
	// Reason, Detail and Attempts are the Refund/Deliver/RecordAttempt arguments, if any (the
	// reason code and the detail as the ledger keeps them); Reason is RaiseAlarm's message.
	Reason   string
	Detail   string
	Attempts int
	// Outcome is the outcome the ledger computed (also when the answer was then lost).
	Outcome ledgerdb.Outcome
	// Err is the error returned, if any.
	Err error
}

// MemoryLedger is an in-memory ledger with ledgerdb's guards. It is safe for concurrent use.
type MemoryLedger struct {
	mu           sync.Mutex
	balances     map[string]int64
	jobs         map[ledgerdb.JobKey]*ledgerdb.Job
	fingerprints map[ledgerdb.JobKey][]byte
	entries      []ledgerdb.Entry
	calls        []Call
	lose         map[string]int
	refuse       map[string]error
	alarms       map[alarmKey]string
	// prices holds every version of each kind's price, oldest first.
	prices map[string][]ledgerdb.Price
}

// alarmKey names one alarm: a job's step (ledger_alarms_one_per_step).
type alarmKey struct {
	job  ledgerdb.JobKey
	step string
}

// NewMemoryLedger returns an empty ledger.
func NewMemoryLedger() *MemoryLedger {
	return &MemoryLedger{balances: map[string]int64{}, jobs: map[ledgerdb.JobKey]*ledgerdb.Job{}, fingerprints: map[ledgerdb.JobKey][]byte{},
		lose: map[string]int{}, refuse: map[string]error{}, alarms: map[alarmKey]string{}, prices: map[string][]ledgerdb.Price{}}
}

// SetPrice puts p on the price list as the kind's latest version: jobs submitted after it are
// charged at it.
func (m *MemoryLedger) SetPrice(p ledgerdb.Price) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p.Version = len(m.prices[p.Kind]) + 1
	m.prices[p.Kind] = append(m.prices[p.Kind], p)
}

// currentPrice is the kind's latest price, if it has one.
func (m *MemoryLedger) currentPrice(kind string) (ledgerdb.Price, bool) {
	versions := m.prices[kind]
	if len(versions) == 0 {
		return ledgerdb.Price{}, false
	}
	return versions[len(versions)-1], true
}

// Grant opens the account if needed and adds amount credits to it.
func (m *MemoryLedger) Grant(accountID string, amount int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.append(accountID, "", ledgerdb.KindGrant, amount)
}

// AddPlaceholder writes the placeholder (state submitting) of the job key names, in its account,
// at its kind's current price, as the job service does before the workflow, for a request whose
// fingerprint is any.
func (m *MemoryLedger) AddPlaceholder(key ledgerdb.JobKey, kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.balances[key.AccountID]; !ok {
		m.balances[key.AccountID] = 0
	}
	price, _ := m.currentPrice(kind)
	m.jobs[key] = placeholder(key, price, 0)
}

// placeholder is a submitting job at price, holding maxUnits units (0: the price's maximum).
func placeholder(key ledgerdb.JobKey, price ledgerdb.Price, maxUnits int64) *ledgerdb.Job {
	held := price.MaxUnits
	if maxUnits > 0 {
		held = maxUnits
	}
	return &ledgerdb.Job{ID: key.JobID, AccountID: key.AccountID, State: ledgerdb.StateSubmitting,
		Kind: price.Kind, PriceVersion: price.Version, Unit: price.Unit, UnitPrice: price.UnitPrice,
		HeldUnits: held, Cost: price.UnitPrice * held}
}

// RefuseForGood makes every later call of op fail with err, as the database does when it refuses
// a step for good (an out-of-range value, a violated constraint).
func (m *MemoryLedger) RefuseForGood(op string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refuse[op] = err
}

// Alarm is the message of the alarm raised for a job's step, if any.
func (m *MemoryLedger) Alarm(key ledgerdb.JobKey, step string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg, ok := m.alarms[alarmKey{key, step}]
	return msg, ok
}

// Delete turns a settled job into a tombstone, as ledgerdb's Delete does.
func (m *MemoryLedger) Delete(key ledgerdb.JobKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[key]
	if !ok {
		return ledgerdb.ErrJobNotFound
	}
	switch j.State {
	case ledgerdb.StateRejected, ledgerdb.StateDelivered, ledgerdb.StateRefunded, ledgerdb.StateRecovered:
		j.StateBeforeDelete, j.State = j.State, ledgerdb.StateDeleted
		return nil
	case ledgerdb.StateDeleted:
		return nil
	}
	return ledgerdb.ErrJobActive
}

// LoseAnswers makes the next n calls of op commit their change and then return [ErrAnswerLost].
func (m *MemoryLedger) LoseAnswers(op string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lose[op] += n
}

// Job returns a copy of the job's row.
func (m *MemoryLedger) Job(key ledgerdb.JobKey) (ledgerdb.Job, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[key]
	if !ok {
		return ledgerdb.Job{}, false
	}
	return *j, true
}

// Entries returns the ledger rows of a job, oldest first. A job's rows are on its own account,
// and name it by its ID, as the real ledger's reads do.
func (m *MemoryLedger) Entries(key ledgerdb.JobKey) []ledgerdb.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ledgerdb.Entry
	for _, e := range m.entries {
		if e.AccountID == key.AccountID && e.JobID == key.JobID {
			out = append(out, e)
		}
	}
	return out
}

// Kinds returns the kinds of a job's ledger rows, oldest first.
func (m *MemoryLedger) Kinds(key ledgerdb.JobKey) []ledgerdb.EntryKind {
	var kinds []ledgerdb.EntryKind
	for _, e := range m.Entries(key) {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

// Net is the sum of a job's ledger rows (the net-effect rule: −(units used × unit price) once
// settled, 0 when not charged).
func (m *MemoryLedger) Net(key ledgerdb.JobKey) int64 {
	var sum int64
	for _, e := range m.Entries(key) {
		sum += e.Amount
	}
	return sum
}

// Balance is the account's balance; [MemoryLedger.Audit] checks it against its rows.
func (m *MemoryLedger) Balance(accountID string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.balances[accountID]
}

// Audit checks the reversing-pairs, net-effect and sum-of-rows rules: every job has exactly the
// rows its flags record and its rows sum to what its state and settlement say, and every account's
// balance is the sum of its rows.
func (m *MemoryLedger) Audit() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sums := map[string]int64{}
	rows := map[ledgerdb.JobKey]map[ledgerdb.EntryKind]int{}
	nets := map[ledgerdb.JobKey]int64{}
	for _, e := range m.entries {
		sums[e.AccountID] += e.Amount
		if e.JobID == "" {
			continue
		}
		key := ledgerdb.JobKey{AccountID: e.AccountID, JobID: e.JobID}
		if rows[key] == nil {
			rows[key] = map[ledgerdb.EntryKind]int{}
		}
		rows[key][e.Kind]++
		nets[key] += e.Amount
	}
	for key, j := range m.jobs {
		for kind, want := range j.WantsRows() {
			if rows[key][kind] != want {
				return fmt.Errorf("job %s has %d %s rows, its flags say %d", key, rows[key][kind], kind, want)
			}
		}
		if nets[key] != j.Net() {
			return fmt.Errorf("job %s: rows sum to %d, its state and settlement say %d", key, nets[key], j.Net())
		}
		delete(rows, key)
	}
	for key := range rows {
		return fmt.Errorf("job %s has ledger rows but no job row", key)
	}
	for acct, bal := range m.balances {
		if sums[acct] != bal {
			return fmt.Errorf("account %q: balance %d, rows sum to %d", acct, bal, sums[acct])
		}
	}
	return nil
}

// Calls returns every call received, in order.
func (m *MemoryLedger) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// CallCount is how many times op was called.
func (m *MemoryLedger) CallCount(op string) int {
	n := 0
	for _, c := range m.Calls() {
		if c.Op == op {
			n++
		}
	}
	return n
}

// Submit follows ledger_submit: writes the placeholder once, at the kind's current price; the same
// request again answers it, another request is a conflict, a deleted ID is gone, a kind with no
// price unknown.
func (m *MemoryLedger) Submit(_ context.Context, sub ledgerdb.Submission) (ledgerdb.Transition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := sub.Key()
	c := Call{Op: OpSubmit, Job: key}
	t, err := func() (ledgerdb.Transition, error) {
		if err := sub.Validate(); err != nil {
			return ledgerdb.Transition{}, err
		}
		j, ok := m.jobs[key]
		price, priced := m.currentPrice(sub.Kind)
		switch {
		case ok:
		case !m.hasAccount(sub.AccountID):
			return ledgerdb.Transition{}, fmt.Errorf("job %s: %w", key, ledgerdb.ErrUnknownAccount)
		case !priced:
			return ledgerdb.Transition{}, fmt.Errorf("job %s: %w", key, ledgerdb.ErrUnknownKind)
		case sub.MaxUnits > price.MaxUnits:
			return ledgerdb.Transition{}, &ledgerdb.InvalidInputError{Field: "max units", Reason: fmt.Sprintf("is %d; a %s job holds at most %d", sub.MaxUnits, sub.Kind, price.MaxUnits)}
		default:
			j = placeholder(key, price, sub.MaxUnits)
			m.jobs[key], m.fingerprints[key] = j, sub.Fingerprint()
			return m.answer(ledgerdb.Applied, j, 0), nil
		}
		switch {
		case j.State == ledgerdb.StateDeleted:
			return m.answer(ledgerdb.NotApplied, j, 0), fmt.Errorf("job %s: %w", key, ledgerdb.ErrGone)
		case m.fingerprints[key] != nil && !bytes.Equal(m.fingerprints[key], sub.Fingerprint()),
			j.Kind != "" && sub.MaxUnits != 0 && sub.MaxUnits != j.HeldUnits,
			j.Kind != "" && sub.MaxUnits == 0 && m.prices[j.Kind][j.PriceVersion-1].MaxUnits != j.HeldUnits:
			return m.answer(ledgerdb.NotApplied, j, 0), fmt.Errorf("job %s: %w", key, ledgerdb.ErrConflict)
		}
		return m.answer(ledgerdb.AlreadyApplied, j, 0), nil
	}()
	c.Outcome, c.Err = t.Outcome, err
	m.calls = append(m.calls, c)
	return t, err
}

// Charge follows ledger_charge for any request.
func (m *MemoryLedger) Charge(ctx context.Context, key ledgerdb.JobKey) (ledgerdb.Transition, error) {
	return m.ChargeMatching(ctx, key, nil)
}

// ChargeMatching follows ledger_charge: takes the recorded cost (submitting -> running) or rejects
// the job when the account cannot pay; a job submitted with another request than fingerprint's is
// a conflict (a placeholder added without a fingerprint matches any).
func (m *MemoryLedger) ChargeMatching(_ context.Context, key ledgerdb.JobKey, fingerprint []byte) (ledgerdb.Transition, error) {
	return m.do(Call{Op: OpCharge, Job: key}, func(j *ledgerdb.Job) (ledgerdb.Transition, error) {
		switch {
		case fingerprint != nil && m.fingerprints[key] != nil && !bytes.Equal(fingerprint, m.fingerprints[key]):
			return m.answer(ledgerdb.NotApplied, j, 0), fmt.Errorf("job %s: %w", key, ledgerdb.ErrConflict)
		case j.State == ledgerdb.StateRejected:
			return m.answer(ledgerdb.NotApplied, j, 0), &ledgerdb.RejectedError{Job: key, Reason: j.RejectReason}
		case j.IsCharged:
			return m.answer(ledgerdb.AlreadyApplied, j, 0), nil
		case m.balances[j.AccountID] < j.Cost:
			j.State, j.RejectReason = ledgerdb.StateRejected, ledgerdb.RejectInsufficientCredits
			return m.answer(ledgerdb.NotApplied, j, 0), &ledgerdb.RejectedError{Job: key, Reason: j.RejectReason}
		}
		j.State, j.IsCharged = ledgerdb.StateRunning, true
		return m.answer(ledgerdb.Applied, j, m.append(j.AccountID, j.ID, ledgerdb.KindCharge, -j.Cost)), nil
	})
}

// Refund follows ledger_refund: running -> refunded, giving the recorded cost back, with the
// reason code checked and the detail scrubbed as ledgerdb.Store.Refund does.
func (m *MemoryLedger) Refund(_ context.Context, key ledgerdb.JobKey, reason ledgerdb.Reason, detail string, attempts int) (ledgerdb.Transition, error) {
	if err := ledgerdb.ValidateRefundReason(reason); err != nil {
		return ledgerdb.Transition{}, err
	}
	if err := ledgerdb.ValidateAttemptCount(attempts); err != nil {
		return ledgerdb.Transition{}, err
	}
	detail = ledgerdb.ScrubText(detail)
	return m.do(Call{Op: OpRefund, Job: key, Reason: string(reason), Detail: detail, Attempts: attempts}, func(j *ledgerdb.Job) (ledgerdb.Transition, error) {
		if j.State != ledgerdb.StateRunning || !j.IsCharged || j.IsRefunded {
			return m.unmatched(j, ledgerdb.StateRefunded, ledgerdb.StateRecovered)
		}
		j.State, j.IsRefunded, j.RefundReason, j.RefundDetail = ledgerdb.StateRefunded, true, reason, detail
		j.Attempts = max(j.Attempts, attempts)
		return m.answer(ledgerdb.Applied, j, m.append(j.AccountID, j.ID, ledgerdb.KindRefund, j.Cost)), nil
	})
}

// Reclaim follows ledger_reclaim: refunded -> recovered, taking the recorded cost again, and a
// priced job settled at its whole hold (nothing released: the caller knows no usage).
func (m *MemoryLedger) Reclaim(_ context.Context, key ledgerdb.JobKey) (ledgerdb.Transition, error) {
	return m.do(Call{Op: OpReclaim, Job: key}, func(j *ledgerdb.Job) (ledgerdb.Transition, error) {
		if !awaitsReclaim(j) {
			return m.lateResultOf(j, ledgerdb.StateRecovered)
		}
		reclaimRefund(j)
		return m.release(j, nil, m.append(j.AccountID, j.ID, ledgerdb.KindReclaim, -j.Cost)), nil
	})
}

// Deliver follows ledger_deliver: running -> delivered, and a priced job settled at its whole
// hold (nothing released: the caller knows no usage).
func (m *MemoryLedger) Deliver(_ context.Context, key ledgerdb.JobKey, attempts int) (ledgerdb.Transition, error) {
	if err := ledgerdb.ValidateAttemptCount(attempts); err != nil {
		return ledgerdb.Transition{}, err
	}
	return m.do(Call{Op: OpDeliver, Job: key, Attempts: attempts}, func(j *ledgerdb.Job) (ledgerdb.Transition, error) {
		if j.State != ledgerdb.StateRunning {
			return m.unmatched(j, ledgerdb.StateDelivered, ledgerdb.StateRecovered)
		}
		j.State = ledgerdb.StateDelivered
		j.Attempts = max(j.Attempts, attempts)
		return m.release(j, nil, 0), nil
	})
}

// Settle follows ledger_settle: running -> delivered, or refunded -> recovered (the refund
// reclaimed), and a priced job settled at unitsUsed (capped at its hold; nil for the whole hold)
// with its unused hold released, in one step, keeping outputRef. Bad input is refused before the
// job is read, as the store validates it before it calls the database.
func (m *MemoryLedger) Settle(_ context.Context, key ledgerdb.JobKey, attempts int, unitsUsed *int64, outputRef string) (ledgerdb.Transition, error) {
	if err := ledgerdb.ValidateAttemptCount(attempts); err != nil {
		return ledgerdb.Transition{}, err
	}
	if err := ledgerdb.ValidateUnitsUsed(unitsUsed); err != nil {
		return ledgerdb.Transition{}, err
	}
	if outputRef != "" {
		if err := ledgerdb.ValidateOutputRef(outputRef); err != nil {
			return ledgerdb.Transition{}, err
		}
	}
	return m.do(Call{Op: OpSettle, Job: key, Attempts: attempts}, func(j *ledgerdb.Job) (ledgerdb.Transition, error) {
		switch {
		case j.State == ledgerdb.StateRunning:
			j.State, j.OutputRef = ledgerdb.StateDelivered, outputRef
			j.Attempts = max(j.Attempts, attempts)
			return m.release(j, unitsUsed, 0), nil
		case awaitsReclaim(j):
			if j.State != ledgerdb.StateDeleted {
				j.OutputRef = outputRef
			}
			reclaimRefund(j)
			return m.release(j, unitsUsed, m.append(j.AccountID, j.ID, ledgerdb.KindReclaim, -j.Cost)), nil
		}
		return m.lateResultOf(j, ledgerdb.StateDelivered, ledgerdb.StateRecovered)
	})
}

// release follows the settlement of ledger_deliver_running and ledger_recover: settles a priced job at its usage, capped at its hold, and
// gives back the unused part of the hold in one row. entryID is a row the same step wrote before
// (a reclaim), answered when the settlement writes none.
func (m *MemoryLedger) release(j *ledgerdb.Job, unitsUsed *int64, entryID int64) ledgerdb.Transition {
	if j.Kind == "" {
		return m.answer(ledgerdb.Applied, j, entryID)
	}
	used := j.HeldUnits
	if unitsUsed != nil && j.Unit == ledgerdb.UnitGPUSecond {
		used = min(*unitsUsed, j.HeldUnits)
	}
	j.IsSettled, j.UnitsUsed = true, &used
	if released := j.Released(); released > 0 {
		entryID = m.append(j.AccountID, j.ID, ledgerdb.KindRelease, released)
	}
	return m.answer(ledgerdb.Applied, j, entryID)
}

// RaiseAlarm follows ledger_raise_alarm: once per job and step.
func (m *MemoryLedger) RaiseAlarm(_ context.Context, key ledgerdb.JobKey, step, message string) (ledgerdb.Outcome, error) {
	t, err := m.do(Call{Op: OpRaiseAlarm, Job: key, Reason: message}, func(j *ledgerdb.Job) (ledgerdb.Transition, error) {
		if _, ok := m.alarms[alarmKey{key, step}]; ok {
			return m.answer(ledgerdb.AlreadyApplied, j, 0), nil
		}
		m.alarms[alarmKey{key, step}] = message
		return m.answer(ledgerdb.Applied, j, 0), nil
	})
	return t.Outcome, err
}

// RecordAttempt follows ledger_record_attempt: the count of a running or refunded job only grows.
func (m *MemoryLedger) RecordAttempt(_ context.Context, key ledgerdb.JobKey, attempts int) (ledgerdb.Transition, error) {
	if err := ledgerdb.ValidateAttemptCount(attempts); err != nil {
		return ledgerdb.Transition{}, err
	}
	return m.do(Call{Op: OpRecordAttempt, Job: key, Attempts: attempts}, func(j *ledgerdb.Job) (ledgerdb.Transition, error) {
		if j.State != ledgerdb.StateRunning && j.State != ledgerdb.StateRefunded {
			return m.answer(ledgerdb.NotApplied, j, 0), nil
		}
		if attempts <= j.Attempts {
			return m.answer(ledgerdb.AlreadyApplied, j, 0), nil
		}
		j.Attempts = attempts
		return m.answer(ledgerdb.Applied, j, 0), nil
	})
}

// do runs one guarded operation under the lock: the key's validation (the store refuses a bad
// key before it reaches the database), the shared not-found and deleted answers, the operation
// itself, an answer lost after commit, and the call record.
func (m *MemoryLedger) do(c Call, op func(j *ledgerdb.Job) (ledgerdb.Transition, error)) (ledgerdb.Transition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := func() (ledgerdb.Transition, error) {
		if err := c.Job.Validate(); err != nil {
			return ledgerdb.Transition{}, err
		}
		if err := m.refuse[c.Op]; err != nil {
			return ledgerdb.Transition{}, fmt.Errorf("job %s: %w", c.Job, err)
		}
		j, ok := m.jobs[c.Job]
		switch {
		case !ok:
			return ledgerdb.Transition{}, fmt.Errorf("job %s: %w", c.Job, ledgerdb.ErrJobNotFound)
		case j.State == ledgerdb.StateDeleted && c.Op != OpSettle && c.Op != OpReclaim:
			// The steps that bill a late result judge a tombstone themselves (lateResultOf).
			return m.answer(ledgerdb.NotApplied, j, 0), fmt.Errorf("job %s: %w", c.Job, ledgerdb.ErrGone)
		}
		return op(j)
	}()
	c.Outcome, c.Err = t.Outcome, err
	if err == nil && m.lose[c.Op] > 0 {
		m.lose[c.Op]--
		t, c.Err = ledgerdb.Transition{}, fmt.Errorf("job %s: %w", c.Job, ErrAnswerLost)
		err = c.Err
	}
	m.calls = append(m.calls, c)
	return t, err
}

// awaitsReclaim follows ledger_recover's guard: a refunded job — deleted or not — whose
// refund is not reclaimed yet.
func awaitsReclaim(j *ledgerdb.Job) bool {
	return (j.State == ledgerdb.StateRefunded || j.StateBeforeDelete == ledgerdb.StateRefunded) && j.IsRefunded && !j.IsReclaimed
}

// reclaimRefund follows ledger_recover's reclaim: refunded -> recovered, or, for a
// tombstone, its state before deletion (a tombstone stays one).
func reclaimRefund(j *ledgerdb.Job) {
	if j.State == ledgerdb.StateDeleted {
		j.StateBeforeDelete = ledgerdb.StateRecovered
	} else {
		j.State = ledgerdb.StateRecovered
	}
	j.IsReclaimed = true
}

// lateResultOf follows ledger_job_unmatched as the steps that bill a late result call it: a
// tombstone answers as the state it was deleted from, and one never charged (rejected) is gone.
func (m *MemoryLedger) lateResultOf(j *ledgerdb.Job, done ...ledgerdb.State) (ledgerdb.Transition, error) {
	switch {
	case j.State != ledgerdb.StateDeleted:
		return m.unmatched(j, done...)
	case slices.Contains(done, j.StateBeforeDelete):
		return m.answer(ledgerdb.AlreadyApplied, j, 0), nil
	case j.StateBeforeDelete == ledgerdb.StateRejected:
		return m.answer(ledgerdb.NotApplied, j, 0), fmt.Errorf("job %s: %w", j.Key(), ledgerdb.ErrGone)
	}
	return m.answer(ledgerdb.NotApplied, j, 0), nil
}

// unmatched follows ledger_job_unmatched: a job already in one of the done states answers
// AlreadyApplied, any other NotApplied; neither writes anything.
func (m *MemoryLedger) unmatched(j *ledgerdb.Job, done ...ledgerdb.State) (ledgerdb.Transition, error) {
	if slices.Contains(done, j.State) {
		return m.answer(ledgerdb.AlreadyApplied, j, 0), nil
	}
	return m.answer(ledgerdb.NotApplied, j, 0), nil
}

func (m *MemoryLedger) answer(o ledgerdb.Outcome, j *ledgerdb.Job, entryID int64) ledgerdb.Transition {
	t := ledgerdb.Transition{Outcome: o, Job: *j, EntryID: entryID}
	if entryID != 0 {
		t.BalanceAfter = m.balances[j.AccountID]
	}
	return t
}

func (m *MemoryLedger) hasAccount(accountID string) bool {
	_, ok := m.balances[accountID]
	return ok
}

// append writes one ledger row and moves the balance with it (the one-transaction-per-transition
// rule).
func (m *MemoryLedger) append(accountID, jobID string, kind ledgerdb.EntryKind, amount int64) int64 {
	m.balances[accountID] += amount
	id := int64(len(m.entries) + 1)
	m.entries = append(m.entries, ledgerdb.Entry{
		ID: id, AccountID: accountID, JobID: jobID, Kind: kind, Amount: amount, BalanceAfter: m.balances[accountID],
	})
	return id
}
