package activitiestest_test

// The contract between the in-memory ledger the workflow tests run on and the real Postgres store:
// one table of cases, each a sequence of operations on a fresh job with the outcome, state, error,
// balance and settled usage each must answer, and the job's ledger rows at the end, run against
// both. If the two ever answer differently, the workflow tests would be proving the money rules
// against a ledger that is not the real one.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/activities/activitiestest"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// ledger is what a contract case drives: the activities' ledger, and the set-up and read-back
// each implementation does its own way.
type ledger interface {
	activities.Ledger
	// fund opens an account with credits and returns its ID.
	fund(t *testing.T, credits int64) string
	// price puts one of the tests' shared prices on the price list and returns its kind.
	price(t *testing.T, p ledgerdb.Price) string
	// remove deletes a settled job (a tombstone).
	remove(job ledgerdb.JobKey) error
	// balance reads an account's balance.
	balance(accountID string) int64
	// rows reads a job's ledger rows, oldest first.
	rows(t *testing.T, job ledgerdb.JobKey) []ledgertest.Row
	// exists says whether the ledger holds a job under the key.
	exists(t *testing.T, job ledgerdb.JobKey) bool
	// audit checks the reversing-pairs, net-effect and sum-of-rows rules on the account.
	audit(t *testing.T, accountID string)
}

type memory struct{ *activitiestest.MemoryLedger }

func (m memory) fund(t *testing.T, credits int64) string {
	id := ledgertest.ID(t, "acct")
	m.Grant(id, credits)
	return id
}
func (m memory) price(_ *testing.T, p ledgerdb.Price) string {
	m.SetPrice(p)
	return p.Kind
}
func (m memory) remove(job ledgerdb.JobKey) error { return m.Delete(job) }
func (m memory) balance(account string) int64     { return m.Balance(account) }
func (m memory) rows(_ *testing.T, job ledgerdb.JobKey) []ledgertest.Row {
	rows := []ledgertest.Row{}
	for _, e := range m.Entries(job) {
		rows = append(rows, ledgertest.Row{Kind: e.Kind, Amount: e.Amount})
	}
	return rows
}
func (m memory) exists(_ *testing.T, job ledgerdb.JobKey) bool {
	_, ok := m.Job(job)
	return ok
}
func (m memory) audit(t *testing.T, _ string) { require.NoError(t, m.Audit()) }

type postgres struct{ *ledgerdb.Store }

func (p postgres) fund(t *testing.T, credits int64) string {
	return ledgertest.Account(t, p.Store, credits)
}
func (p postgres) price(t *testing.T, price ledgerdb.Price) string {
	if price.Unit == ledgerdb.UnitJob {
		return ledgertest.Fixed(t, p.Store, price.UnitPrice)
	}
	return ledgertest.Metered(t, p.Store, price.UnitPrice, price.MaxUnits)
}
func (p postgres) remove(job ledgerdb.JobKey) error {
	_, err := p.Delete(context.Background(), job)
	return err
}
func (p postgres) balance(account string) int64 {
	b, err := p.Balance(context.Background(), account)
	if err != nil {
		panic(err)
	}
	return b
}
func (p postgres) rows(t *testing.T, job ledgerdb.JobKey) []ledgertest.Row {
	return ledgertest.Rows(t, p.Store, job)
}
func (p postgres) exists(t *testing.T, job ledgerdb.JobKey) bool {
	_, err := p.Job(context.Background(), job)
	if errors.Is(err, ledgerdb.ErrJobNotFound) {
		return false
	}
	require.NoError(t, err)
	return true
}
func (p postgres) audit(t *testing.T, account string) { ledgertest.RequireSound(t, p.Store, account) }

// step is one operation of a case and what it must answer.
type step struct {
	// op is one of submit, submit-other, submit-hold (the job's ID naming arg units),
	// submit-unknown-kind and submit-above-max (a fresh ID, which must not be written), charge,
	// charge-other, refund, reclaim, deliver, settle, attempt, alarm, delete, and spend (another
	// job of the case's kind, holding its maximum, submitted and charged on the account).
	op  string
	arg int // attempts, or units for submit-hold
	// units is the usage a settle reports (nil: none).
	units   *int64
	outcome ledgerdb.Outcome
	state   ledgerdb.State
	err     error
	// errText is a part of the error's text, when the error must say something (the kind's
	// maximum).
	errText string
	balance int64
	// used, when set, is the units the job must be settled at after the step.
	used *int64
	// wrote, when set, says whether the step answers a ledger row (an entry ID, and the balance
	// after it).
	wrote *bool
}

// contractCase is a job of the fixed-price kind (40 credits), or of the metered kind (4 credits
// a GPU-second, at most 10: a hold of 40), submitted holding maxUnits (0: the kind's maximum),
// the steps it goes through, and, when set, the ledger rows it must end with.
type contractCase struct {
	metered  bool
	maxUnits int64
	credits  int64
	steps    []step
	rows     []ledgertest.Row
}

const (
	credits = 100
	cost    = 40
)

var (
	fixedPrice   = ledgerdb.Price{Kind: "fixed-40", Unit: ledgerdb.UnitJob, UnitPrice: cost, MaxUnits: 1}
	meteredPrice = ledgerdb.Price{Kind: "metered-4x10", Unit: ledgerdb.UnitGPUSecond, UnitPrice: 4, MaxUnits: 10}
)

func units(n int64) *int64 { return &n }

var yes, no = true, false

func row(kind ledgerdb.EntryKind, amount int64) ledgertest.Row {
	return ledgertest.Row{Kind: kind, Amount: amount}
}

var contractCases = map[string]contractCase{
	"charge then repeat": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "charge", outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRunning, balance: 60},
	}},
	"delivered on time": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60},
		{op: "settle", arg: 1, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60},
		{op: "refund", arg: 1, outcome: ledgerdb.NotApplied, state: ledgerdb.StateDelivered, balance: 60},
		{op: "reclaim", outcome: ledgerdb.NotApplied, state: ledgerdb.StateDelivered, balance: 60},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40)}},
	"refunded then recovered": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "refund", arg: 3, outcome: ledgerdb.Applied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "refund", arg: 3, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "deliver", arg: 3, outcome: ledgerdb.NotApplied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "settle", arg: 3, outcome: ledgerdb.Applied, state: ledgerdb.StateRecovered, balance: 60},
		{op: "settle", arg: 3, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 60},
		{op: "reclaim", outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 60},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRefund, 40), row(ledgerdb.KindReclaim, -40)}},
	"deliver then reclaim (the original success path)": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "reclaim", outcome: ledgerdb.NotApplied, state: ledgerdb.StateRunning, balance: 60, wrote: &no},
		{op: "deliver", arg: 2, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60, used: units(1), wrote: &no},
		{op: "deliver", arg: 2, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60, used: units(1), wrote: &no},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40)}},
	"nothing applies before the charge": {steps: []step{
		{op: "refund", arg: 1, outcome: ledgerdb.NotApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "reclaim", outcome: ledgerdb.NotApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "settle", arg: 1, outcome: ledgerdb.NotApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "settle", arg: 1, units: units(3), outcome: ledgerdb.NotApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "delete", err: ledgerdb.ErrJobActive, balance: 100},
	}, rows: []ledgertest.Row{}},
	"attempts only grow": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "attempt", arg: 2, outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "attempt", arg: 1, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: -1, err: ledgerdb.ErrInvalidInput, balance: 60},
		{op: "deliver", arg: -1, err: ledgerdb.ErrInvalidInput, balance: 60},
	}},
	"the same request again, another request": {steps: []step{
		{op: "submit", outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "submit-other", err: ledgerdb.ErrConflict, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "charge-other", err: ledgerdb.ErrConflict, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
	}},
	"a deleted job is gone for good": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60},
		{op: "delete", balance: 60},
		{op: "charge", err: ledgerdb.ErrGone, balance: 60},
		// A late result's steps answer a tombstone as the state it was deleted from.
		{op: "settle", arg: 1, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDeleted, balance: 60, wrote: &no},
		{op: "reclaim", outcome: ledgerdb.NotApplied, state: ledgerdb.StateDeleted, balance: 60, wrote: &no},
		{op: "deliver", arg: 1, err: ledgerdb.ErrGone, balance: 60},
		{op: "refund", arg: 1, err: ledgerdb.ErrGone, balance: 60},
		{op: "submit", err: ledgerdb.ErrGone, balance: 60},
		// Bad input is refused before the job is read: invalid, not gone.
		{op: "settle", arg: -1, err: ledgerdb.ErrInvalidInput, balance: 60},
		{op: "deliver", arg: -1, err: ledgerdb.ErrInvalidInput, balance: 60},
	}},
	// Deletion hides a job, never what it owes: its late result still reclaims the refund.
	"a deleted refunded job takes its late result": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "refund", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "delete", balance: 100},
		{op: "settle", arg: 1, units: units(3), outcome: ledgerdb.Applied, state: ledgerdb.StateDeleted, balance: 88, used: units(3), wrote: &yes},
		{op: "settle", arg: 1, units: units(9), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDeleted, balance: 88, used: units(3), wrote: &no},
		{op: "reclaim", outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDeleted, balance: 88, wrote: &no},
		{op: "charge", err: ledgerdb.ErrGone, balance: 88},
		{op: "refund", arg: 1, err: ledgerdb.ErrGone, balance: 88},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRefund, 40), row(ledgerdb.KindReclaim, -40), row(ledgerdb.KindRelease, 28)}},
	"a deleted refunded job reclaimed by the original step": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "refund", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "delete", balance: 100},
		{op: "reclaim", outcome: ledgerdb.Applied, state: ledgerdb.StateDeleted, balance: 60, used: units(1), wrote: &yes},
		{op: "settle", arg: 1, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDeleted, balance: 60, wrote: &no},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRefund, 40), row(ledgerdb.KindReclaim, -40)}},
	"a deleted rejected job takes nothing": {credits: 30, steps: []step{
		{op: "charge", err: ledgerdb.ErrInsufficientCredits, state: ledgerdb.StateRejected, balance: 30},
		{op: "delete", balance: 30},
		{op: "settle", arg: 1, err: ledgerdb.ErrGone, balance: 30},
		{op: "reclaim", err: ledgerdb.ErrGone, balance: 30},
	}, rows: []ledgertest.Row{}},
	"an alarm is raised once": {steps: []step{
		{op: "alarm", outcome: ledgerdb.Applied, balance: 100},
		{op: "alarm", outcome: ledgerdb.AlreadyApplied, balance: 100},
	}},
	"insufficient credits": {credits: 30, steps: []step{
		{op: "charge", err: ledgerdb.ErrInsufficientCredits, state: ledgerdb.StateRejected, balance: 30},
		{op: "charge", err: ledgerdb.ErrRejected, state: ledgerdb.StateRejected, balance: 30},
	}, rows: []ledgertest.Row{}},

	// A job sold whole: settled at its one unit, nothing released.
	"fixed: delivered by the original step, settled at once": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "deliver", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60, used: units(1), wrote: &no},
		{op: "settle", arg: 1, units: units(0), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60, used: units(1), wrote: &no},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40)}},
	"fixed: recovered by the original step, settled at once": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "refund", arg: 3, outcome: ledgerdb.Applied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "reclaim", outcome: ledgerdb.Applied, state: ledgerdb.StateRecovered, balance: 60, used: units(1), wrote: &yes},
		{op: "settle", arg: 3, units: units(0), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 60, used: units(1), wrote: &no},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRefund, 40), row(ledgerdb.KindReclaim, -40)}},
	"fixed: a usage above one unit is the price": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, units: units(7), outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60, used: units(1)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40)}},
	// ledgerdb.UnitJob: "its charge holds one unit and nothing is released".
	"fixed: a usage of zero does not make the job free": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, units: units(0), outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60, used: units(1)},
		{op: "settle", arg: 1, units: units(0), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60, used: units(1)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40)}},
	"fixed: a late result reporting zero units": {steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "refund", arg: 3, outcome: ledgerdb.Applied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "settle", arg: 3, units: units(0), outcome: ledgerdb.Applied, state: ledgerdb.StateRecovered, balance: 60, used: units(1)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRefund, 40), row(ledgerdb.KindReclaim, -40)}},

	// Metered: 4 credits a GPU-second, a hold of 10 seconds (40 credits).
	"metered: usage within the hold": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, units: units(3), outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 88, used: units(3)},
		{op: "settle", arg: 1, units: units(7), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 88, used: units(3)},
		{op: "settle", arg: 2, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 88, used: units(3)},
		{op: "refund", arg: 1, outcome: ledgerdb.NotApplied, state: ledgerdb.StateDelivered, balance: 88},
		{op: "reclaim", outcome: ledgerdb.NotApplied, state: ledgerdb.StateDelivered, balance: 88},
		{op: "delete", balance: 88},
		{op: "settle", arg: 1, units: units(1), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDeleted, balance: 88, used: units(3)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRelease, 28)}},
	"metered: usage above the hold is capped": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, units: units(25), outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60, used: units(10)},
		{op: "settle", arg: 1, units: units(0), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60, used: units(10)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40)}},
	"metered: usage equal to the hold": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, units: units(10), outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60, used: units(10)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40)}},
	"metered: zero usage returns the whole hold": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, units: units(0), outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 100, used: units(0)},
		{op: "settle", arg: 1, units: units(10), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 100, used: units(0)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRelease, 40)}},
	"metered: no usage reported bills the whole hold": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60, used: units(10)},
		{op: "settle", arg: 1, units: units(2), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60, used: units(10)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40)}},
	"metered: a late result after a refund": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "refund", arg: 3, outcome: ledgerdb.Applied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "settle", arg: 3, units: units(5), outcome: ledgerdb.Applied, state: ledgerdb.StateRecovered, balance: 80, used: units(5)},
		{op: "settle", arg: 3, units: units(9), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 80, used: units(5)},
		{op: "reclaim", outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 80},
		{op: "refund", arg: 3, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 80},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRefund, 40),
		row(ledgerdb.KindReclaim, -40), row(ledgerdb.KindRelease, 20)}},
	"metered: a late result above the hold": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "refund", arg: 3, outcome: ledgerdb.Applied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "settle", arg: 3, units: units(11), outcome: ledgerdb.Applied, state: ledgerdb.StateRecovered, balance: 60, used: units(10)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRefund, 40), row(ledgerdb.KindReclaim, -40)}},
	"metered: a smaller hold of the client's own": {metered: true, maxUnits: 5, steps: []step{
		{op: "submit-hold", arg: 5, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "submit-hold", arg: 10, err: ledgerdb.ErrConflict, balance: 100},
		{op: "submit-hold", arg: 0, err: ledgerdb.ErrConflict, balance: 100},
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 80},
		{op: "settle", arg: 1, units: units(8), outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 80, used: units(5)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -20)}},
	"metered: the kind's maximum named is the same request": {metered: true, steps: []step{
		{op: "submit-hold", arg: 10, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateSubmitting, balance: 100},
		{op: "submit-hold", arg: 9, err: ledgerdb.ErrConflict, balance: 100},
	}, rows: []ledgertest.Row{}},
	// The original version's Deliver and Reclaim know no usage: they settle a priced job at its
	// whole hold at once, releasing nothing, and a later Settle writes nothing.
	"metered: delivered by the original step, settled at its whole hold": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "deliver", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60, used: units(10), wrote: &no},
		{op: "settle", arg: 1, units: units(2), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60, used: units(10), wrote: &no},
		{op: "settle", arg: 1, units: units(0), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60, used: units(10), wrote: &no},
		{op: "settle", arg: 1, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60, used: units(10), wrote: &no},
		{op: "deliver", arg: 2, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 60, used: units(10), wrote: &no},
		{op: "reclaim", outcome: ledgerdb.NotApplied, state: ledgerdb.StateDelivered, balance: 60, used: units(10), wrote: &no},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40)}},
	"metered: recovered by the original step, settled at its whole hold": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "refund", arg: 3, outcome: ledgerdb.Applied, state: ledgerdb.StateRefunded, balance: 100},
		{op: "reclaim", outcome: ledgerdb.Applied, state: ledgerdb.StateRecovered, balance: 60, used: units(10), wrote: &yes},
		{op: "reclaim", outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 60, used: units(10), wrote: &no},
		{op: "settle", arg: 3, units: units(0), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 60, used: units(10), wrote: &no},
		{op: "settle", arg: 3, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 60, used: units(10), wrote: &no},
		{op: "deliver", arg: 3, outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: 60, used: units(10), wrote: &no},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRefund, 40), row(ledgerdb.KindReclaim, -40)}},
	"metered: a smaller hold, delivered by the original step": {metered: true, maxUnits: 3, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 88},
		{op: "deliver", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 88, used: units(3), wrote: &no},
		{op: "settle", arg: 1, units: units(1), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDelivered, balance: 88, used: units(3), wrote: &no},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -12)}},
	"metered: recovered by the original step into debt": {metered: true, credits: 40, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 0},
		{op: "refund", arg: 3, outcome: ledgerdb.Applied, state: ledgerdb.StateRefunded, balance: 40},
		{op: "spend", outcome: ledgerdb.Applied, balance: 0},
		{op: "reclaim", outcome: ledgerdb.Applied, state: ledgerdb.StateRecovered, balance: -40, used: units(10), wrote: &yes},
		{op: "settle", arg: 3, units: units(0), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateRecovered, balance: -40, used: units(10), wrote: &no},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRefund, 40), row(ledgerdb.KindReclaim, -40)}},
	"metered: a negative usage writes nothing": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "settle", arg: 1, units: units(-1), err: ledgerdb.ErrInvalidInput, balance: 60},
		{op: "settle", arg: 1, units: units(4), outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 84, used: units(4), wrote: &yes},
		{op: "settle", arg: 1, units: units(-1), err: ledgerdb.ErrInvalidInput, balance: 84},
		{op: "delete", balance: 84},
		// Refused before the job is read: invalid, not gone, in both ledgers.
		{op: "settle", arg: 1, units: units(-1), err: ledgerdb.ErrInvalidInput, balance: 84},
		{op: "settle", arg: 1, units: units(1), outcome: ledgerdb.AlreadyApplied, state: ledgerdb.StateDeleted, balance: 84, used: units(4)},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRelease, 24)}},
	"metered: a negative usage on an old-step job writes nothing": {metered: true, steps: []step{
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
		{op: "deliver", arg: 1, outcome: ledgerdb.Applied, state: ledgerdb.StateDelivered, balance: 60, used: units(10)},
		{op: "settle", arg: 1, units: units(-3), err: ledgerdb.ErrInvalidInput, balance: 60},
		{op: "delete", balance: 60},
		{op: "settle", arg: 1, units: units(-3), err: ledgerdb.ErrInvalidInput, balance: 60},
		{op: "settle", arg: -2, units: units(3), err: ledgerdb.ErrInvalidInput, balance: 60},
		{op: "deliver", arg: -2, err: ledgerdb.ErrInvalidInput, balance: 60},
	}, rows: []ledgertest.Row{row(ledgerdb.KindCharge, -40)}},
	"metered: an unknown kind, and a hold above the kind's, write nothing": {metered: true, steps: []step{
		{op: "submit-unknown-kind", err: ledgerdb.ErrUnknownKind, balance: 100},
		{op: "submit-above-max", err: ledgerdb.ErrInvalidInput, errText: "at most 10", balance: 100},
		{op: "charge", outcome: ledgerdb.Applied, state: ledgerdb.StateRunning, balance: 60},
	}},
}

// TestMemoryLedgerFollowsTheRealOne runs every contract case against the in-memory ledger and the
// real store, and requires both to answer each step the same — the outcome, the state, the error
// (errors.Is), the balance, the units a job was settled at, whether a ledger row was answered,
// and the job's rows at the end (the reversing-pairs, net-effect, price-list, sum-of-rows and
// idempotent-doors rules through the same guards, for jobs sold whole and metered ones). Among
// them: the original version's Deliver and Reclaim settle a priced job at its whole hold at once,
// so that a later Settle answers AlreadyApplied and writes nothing; and bad input (a negative usage
// or attempt count) is refused before the job is read, also on a deleted job.
func TestMemoryLedgerFollowsTheRealOne(t *testing.T) {
	store := ledgertest.Store(t)
	impls := map[string]func() ledger{
		"memory":   func() ledger { return memory{activitiestest.NewMemoryLedger()} },
		"postgres": func() ledger { return postgres{store} },
	}
	for name, c := range contractCases {
		for impl, open := range impls {
			t.Run(name+"/"+impl, func(t *testing.T) {
				l := open()
				funded := c.credits
				if funded == 0 {
					funded = credits
				}
				runCase(t, l, l.fund(t, funded), c)
			})
		}
	}
}

func runCase(t *testing.T, l ledger, account string, c contractCase) {
	ctx := context.Background()
	price := fixedPrice
	if c.metered {
		price = meteredPrice
	}
	kind := l.price(t, price)
	unpriced := ledgertest.OwnKind(t)
	sub := ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: account, Kind: kind, MaxUnits: c.maxUnits}
	sub.Request = []byte("s3://in/" + sub.JobID)
	job := sub.Key()
	other := sub
	other.Request = []byte("s3://in/other")
	_, err := l.Submit(ctx, sub)
	require.NoError(t, err)
	for i, s := range c.steps {
		var (
			tr    ledgerdb.Transition
			err   error
			fresh ledgerdb.JobKey
		)
		switch s.op {
		case "submit":
			tr, err = l.Submit(ctx, sub)
		case "submit-other":
			tr, err = l.Submit(ctx, other)
		case "submit-hold":
			named := sub
			named.MaxUnits = int64(s.arg)
			tr, err = l.Submit(ctx, named)
		case "submit-unknown-kind":
			fresh = ledgerdb.JobKey{AccountID: account, JobID: ledgertest.ID(t, "job")}
			tr, err = l.Submit(ctx, ledgerdb.Submission{JobID: fresh.JobID, AccountID: account, Kind: unpriced, Request: sub.Request})
		case "submit-above-max":
			fresh = ledgerdb.JobKey{AccountID: account, JobID: ledgertest.ID(t, "job")}
			tr, err = l.Submit(ctx, ledgerdb.Submission{JobID: fresh.JobID, AccountID: account, Kind: kind, MaxUnits: price.MaxUnits + 1, Request: sub.Request})
		case "charge":
			tr, err = l.ChargeMatching(ctx, job, sub.Fingerprint())
		case "charge-other":
			tr, err = l.ChargeMatching(ctx, job, other.Fingerprint())
		case "refund":
			tr, err = l.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out", s.arg)
		case "reclaim":
			tr, err = l.Reclaim(ctx, job)
		case "deliver":
			tr, err = l.Deliver(ctx, job, s.arg)
		case "settle":
			tr, err = l.Settle(ctx, job, s.arg, s.units, "")
		case "spend":
			spent := ledgerdb.Submission{JobID: ledgertest.ID(t, "spent"), AccountID: account, Kind: kind, Request: []byte("spent")}
			if _, err = l.Submit(ctx, spent); err == nil {
				tr, err = l.ChargeMatching(ctx, spent.Key(), nil)
			}
		case "attempt":
			tr, err = l.RecordAttempt(ctx, job, s.arg)
		case "alarm":
			tr.Outcome, err = l.RaiseAlarm(ctx, job, "refund", "out of range")
		case "delete":
			err = l.remove(job)
		default:
			t.Fatalf("unknown op %q", s.op)
		}
		at := fmt.Sprintf("step %d (%s)", i, s.op)
		if s.units != nil {
			at = fmt.Sprintf("step %d (%s, usage %d)", i, s.op, *s.units)
		}
		if s.err != nil {
			require.ErrorIs(t, err, s.err, at)
		} else {
			require.NoError(t, err, at)
		}
		if s.errText != "" {
			require.ErrorContains(t, err, s.errText, at)
		}
		if fresh != (ledgerdb.JobKey{}) {
			require.False(t, l.exists(t, fresh), "%s: the refused submission wrote job %s", at, fresh)
			require.Zero(t, tr.Job.ID, at)
		}
		if s.outcome != "" {
			require.Equal(t, s.outcome, tr.Outcome, at)
		}
		if s.state != "" {
			require.Equal(t, s.state, tr.Job.State, at)
		}
		if s.used != nil {
			require.True(t, tr.Job.IsSettled, at)
			require.NotNil(t, tr.Job.UnitsUsed, at)
			require.Equal(t, *s.used, *tr.Job.UnitsUsed, at)
			require.Equal(t, -*s.used*price.UnitPrice, tr.Job.Net(), "%s: a settled job nets −used × unit price", at)
		}
		if s.wrote != nil {
			require.Equal(t, *s.wrote, tr.EntryID != 0, "%s: entry %d", at, tr.EntryID)
			if *s.wrote {
				require.Equal(t, s.balance, tr.BalanceAfter, "%s: the balance after the row", at)
			} else {
				require.Zero(t, tr.BalanceAfter, at)
			}
		}
		require.Equal(t, s.balance, l.balance(account), at)
	}
	if c.rows != nil {
		got := l.rows(t, job)
		require.True(t, slices.Equal(c.rows, got), "rows of job %s: got %v, want %v", job, got, c.rows)
	}
	l.audit(t, account)
}

// TestBothLedgersKeepJobIDsPerAccount runs one story on the in-memory ledger and on the real
// store and requires both to tell it alike: job IDs belong to their account. Two accounts submit
// the same job ID, each with a body and a kind of its own, and each gets its own job (Applied
// twice, no conflict); one is charged, refunded and recovered by its late result while the other
// is settled on time at its usage, each with exactly its own rows and its own balance (the
// reversing-pairs, net-effect, price-list and sum-of-rows rules); an alarm of one is not the
// other's; deleting one burns the ID in its account only (the remembered-IDs rule). A third
// account, which never submitted the ID, reaches neither job: every call through its key answers
// ErrJobNotFound and writes nothing.
func TestBothLedgersKeepJobIDsPerAccount(t *testing.T) {
	store := ledgertest.Store(t)
	for impl, open := range map[string]func() ledger{
		"memory":   func() ledger { return memory{activitiestest.NewMemoryLedger()} },
		"postgres": func() ledger { return postgres{store} },
	} {
		t.Run(impl, func(t *testing.T) {
			ctx := context.Background()
			l := open()
			fixed, metered := l.price(t, fixedPrice), l.price(t, meteredPrice)
			a, b, stranger := l.fund(t, credits), l.fund(t, credits), l.fund(t, credits)
			id := ledgertest.ID(t, "job")
			ofA := ledgerdb.Submission{JobID: id, AccountID: a, Kind: fixed, Request: []byte("s3://in/a")}
			ofB := ledgerdb.Submission{JobID: id, AccountID: b, Kind: metered, Request: []byte("s3://in/b")}
			jobA, jobB := ofA.Key(), ofB.Key()
			theirs := ledgerdb.JobKey{AccountID: stranger, JobID: id}

			step := func(at string, tr ledgerdb.Transition, err error, outcome ledgerdb.Outcome, state ledgerdb.State) {
				t.Helper()
				require.NoError(t, err, at)
				require.Equal(t, outcome, tr.Outcome, at)
				require.Equal(t, state, tr.Job.State, at)
			}
			for _, sub := range []ledgerdb.Submission{ofA, ofB} {
				tr, err := l.Submit(ctx, sub)
				step("submit in "+sub.AccountID, tr, err, ledgerdb.Applied, ledgerdb.StateSubmitting)
				require.Equal(t, sub.Key(), tr.Job.Key())
			}
			tr, err := l.ChargeMatching(ctx, jobA, ofA.Fingerprint())
			step("charge A", tr, err, ledgerdb.Applied, ledgerdb.StateRunning)
			tr, err = l.ChargeMatching(ctx, jobB, ofB.Fingerprint())
			step("charge B", tr, err, ledgerdb.Applied, ledgerdb.StateRunning)
			tr, err = l.Refund(ctx, jobA, ledgerdb.ReasonTimedOut, "timed out", 3)
			step("refund A", tr, err, ledgerdb.Applied, ledgerdb.StateRefunded)
			tr, err = l.RecordAttempt(ctx, jobB, 2)
			step("B runs on", tr, err, ledgerdb.Applied, ledgerdb.StateRunning)
			tr, err = l.Settle(ctx, jobA, 3, nil, "")
			step("A's late result", tr, err, ledgerdb.Applied, ledgerdb.StateRecovered)
			tr, err = l.Settle(ctx, jobB, 2, units(3), "")
			step("B's result", tr, err, ledgerdb.Applied, ledgerdb.StateDelivered)
			for _, job := range []ledgerdb.JobKey{jobA, jobB} {
				outcome, err := l.RaiseAlarm(ctx, job, "settle", "refused")
				require.NoError(t, err)
				require.Equal(t, ledgerdb.Applied, outcome, "the alarm of %s is its own", job)
			}

			// The stranger's key reaches neither job, and writes nothing.
			for name, call := range map[string]func() error{
				"charge":  func() error { _, err := l.ChargeMatching(ctx, theirs, ofA.Fingerprint()); return err },
				"refund":  func() error { _, err := l.Refund(ctx, theirs, ledgerdb.ReasonTimedOut, "timed out", 3); return err },
				"reclaim": func() error { _, err := l.Reclaim(ctx, theirs); return err },
				"deliver": func() error { _, err := l.Deliver(ctx, theirs, 3); return err },
				"settle":  func() error { _, err := l.Settle(ctx, theirs, 3, units(0), ""); return err },
				"attempt": func() error { _, err := l.RecordAttempt(ctx, theirs, 4); return err },
				"alarm":   func() error { _, err := l.RaiseAlarm(ctx, theirs, "refund", "forged"); return err },
				"delete":  func() error { return l.remove(theirs) },
			} {
				require.ErrorIs(t, call(), ledgerdb.ErrJobNotFound, "%s through the stranger's key", name)
			}
			require.False(t, l.exists(t, theirs))
			require.Empty(t, l.rows(t, theirs))

			require.Equal(t, []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRefund, 40), row(ledgerdb.KindReclaim, -40)}, l.rows(t, jobA))
			require.Equal(t, []ledgertest.Row{row(ledgerdb.KindCharge, -40), row(ledgerdb.KindRelease, 28)}, l.rows(t, jobB))
			require.Equal(t, int64(60), l.balance(a))
			require.Equal(t, int64(88), l.balance(b))
			require.Equal(t, int64(credits), l.balance(stranger))

			// Deleting A's job burns the ID in A alone.
			require.NoError(t, l.remove(jobA))
			_, err = l.Submit(ctx, ofA)
			require.ErrorIs(t, err, ledgerdb.ErrGone)
			tr, err = l.Submit(ctx, ofB)
			step("B's job after A's delete", tr, err, ledgerdb.AlreadyApplied, ledgerdb.StateDelivered)
			tr, err = l.Settle(ctx, jobB, 2, nil, "")
			step("B settled again", tr, err, ledgerdb.AlreadyApplied, ledgerdb.StateDelivered)
			for _, acct := range []string{a, b, stranger} {
				l.audit(t, acct)
			}
		})
	}
}
