package ledgermodel

import "slices"

// Job states, as the ledger names them (docs/design.md, "The job state machine").
const (
	Submitting = "submitting"
	Rejected   = "rejected"
	Running    = "running"
	Delivered  = "delivered"
	Refunded   = "refunded"
	Recovered  = "recovered"
	Deleted    = "deleted"
)

// Job is one job's money.
type Job struct {
	ID   string
	Kind string
	// Metered jobs are sold by the GPU-second: they settle at their usage and release the rest
	// of the hold. Other jobs are sold by the job: one unit, no release.
	Metered   bool
	UnitPrice int64
	HeldUnits int64
	State     string
	// Before is the state a deleted job was deleted from (recovered once its late result came).
	Before                                string
	Charged, Refunded, Reclaimed, Settled bool
	// Used is the units the job was settled at.
	Used int64
	// charge and reclaim are the rows that drew the job's credits; -1 before.
	charge, reclaim int
	// held is the credits the job's draws took from each block and no return gave back:
	// recognised as revenue when the job is settled, never before.
	held map[int]int64
}

// Hold is what the charge takes: unit price × held units (the price-list rule).
func (j *Job) Hold() int64 { return j.UnitPrice * j.HeldUnits }

// Released is what the settlement gave back: (held − used) × unit price of a metered job.
func (j *Job) Released() int64 {
	if !j.Settled || !j.Metered {
		return 0
	}
	return (j.HeldUnits - j.Used) * j.UnitPrice
}

// MoneyCharged says the account pays for the job as it stands: running, delivered, recovered,
// or deleted from one of those.
func (j *Job) MoneyCharged() bool {
	s := j.State
	if s == Deleted {
		s = j.Before
	}
	return s == Running || s == Delivered || s == Recovered
}

// Net is what the job's rows add up to (the net-effect rule): −used × price once settled,
// −hold while charged and unsettled, 0 otherwise.
func (j *Job) Net() int64 {
	switch {
	case !j.MoneyCharged():
		return 0
	case j.Settled:
		return -j.Used * j.UnitPrice
	}
	return -j.Hold()
}

// Submit records a job of a kind at its price: submitting, nothing charged. A second submission
// of the ID answers AlreadyApplied; of a deleted job's, Gone: an ID once accepted is never
// charged again (the remembered-IDs rule).
func (a *Account) Submit(id, kind string, metered bool, unitPrice, heldUnits int64) Outcome {
	if j, ok := a.Jobs[id]; ok {
		if j.State == Deleted {
			return Gone
		}
		return AlreadyApplied
	}
	if !metered {
		heldUnits = 1
	}
	a.Jobs[id] = &Job{ID: id, Kind: kind, Metered: metered, UnitPrice: unitPrice, HeldUnits: heldUnits,
		State: Submitting, charge: -1, reclaim: -1, held: map[int]int64{}}
	return Applied
}

// Charge takes the job's hold from the spendable blocks, in the order of spending. The spendable
// blocks cannot cover it: the job is rejected, nothing charged, even when the balance could (credits
// not started or past their expiry pay for nothing). A charge is never a debt.
func (a *Account) Charge(id string) Outcome {
	j := a.Jobs[id]
	switch {
	case j == nil:
		return NotFound
	case j.State == Rejected || j.State == Deleted && j.Before == Rejected:
		return Insufficient
	case j.State != Submitting:
		return AlreadyApplied
	case a.Spendable() < j.Hold():
		j.State = Rejected
		return Insufficient
	}
	i := a.write(&Row{Kind: Charge, Amount: -j.Hold(), Job: id, Block: Debt, CausedBy: -1})
	a.draw(i, j.Hold(), (*Block).spendable)
	j.charge, j.Charged, j.State = i, true, Running
	a.hold(j, i)
	return Applied
}

// hold adds what row i drew to the job's held credits.
func (a *Account) hold(j *Job, i int) {
	for _, mv := range a.Rows[i].Moves {
		if mv.Block != Debt {
			j.held[mv.Block] -= mv.Amount
		}
	}
}

// Refund gives a running job's hold back to the blocks its charge took it from. A tombstone takes
// no refund: it was never running when deleted.
func (a *Account) Refund(id string) Outcome {
	j := a.Jobs[id]
	switch {
	case j == nil:
		return NotFound
	case j.State == Deleted:
		return Gone
	case j.Refunded:
		return AlreadyApplied
	case j.State != Running:
		return NotApplied
	}
	i := a.write(&Row{Kind: Refund, Amount: j.Hold(), Job: id, Block: Debt, CausedBy: -1})
	a.giveBack(j, i, j.charge, j.Hold())
	j.Refunded, j.State = true, Refunded
	return Applied
}

// Settle takes a job's result with the units it reports (nil: none, billed the whole hold;
// capped at the held units). A running job is delivered and settled; a refunded one, deleted or
// not, is recovered: the reclaim draws its hold again in today's order of spending — a debt for
// what the blocks cannot cover, never refused (the debt rule) — and it is settled. Settling
// releases (held − used) × unit price of a metered job to the blocks of the hold's last draw.
// The job's draws, net, become revenue now: only delivered work is revenue.
func (a *Account) Settle(id string, units *int64) Outcome {
	j := a.Jobs[id]
	if j == nil {
		return NotFound
	}
	if units != nil && *units < 0 {
		return Refused
	}
	state := j.State
	if state == Deleted {
		state = j.Before
	}
	switch {
	case j.State == Deleted && state == Rejected:
		return Gone
	case state == Submitting || state == Rejected:
		return NotApplied
	case state == Delivered || state == Recovered:
		return AlreadyApplied
	}
	j.Used = j.HeldUnits
	if j.Metered && units != nil {
		j.Used = min(*units, j.HeldUnits)
	}
	source := j.charge
	next := Delivered
	if state == Refunded {
		i := a.write(&Row{Kind: Reclaim, Amount: -j.Hold(), Job: id, Block: Debt, CausedBy: -1})
		a.drawIntoDebt(i, j.Hold())
		a.hold(j, i)
		j.reclaim, j.Reclaimed, source, next = i, true, i, Recovered
	}
	j.Settled = true
	if r := j.Released(); r > 0 {
		i := a.write(&Row{Kind: Release, Amount: r, Job: id, Block: Debt, CausedBy: -1})
		a.giveBack(j, i, source, r)
	}
	a.Revenue.recognise(a, j)
	if j.State == Deleted {
		j.Before = next
	} else {
		j.State = next
	}
	return Applied
}

// Delete makes a settled, refunded or rejected job a tombstone. Money follows the work:
// deleting moves no money, and a refunded tombstone still takes its late result. A job
// submitting or running is refused: its rows are the evidence for reconciliation.
func (a *Account) Delete(id string) Outcome {
	j := a.Jobs[id]
	switch {
	case j == nil:
		return NotFound
	case j.State == Deleted:
		return AlreadyApplied
	case j.State == Submitting || j.State == Running:
		return Refused
	}
	j.Before, j.State = j.State, Deleted
	return Applied
}

// giveBack returns amount credits of row i to the blocks the source row drew them from: a debt
// the source drew on first (it was drawn last), then the blocks, the last drawn first, so that
// what stays spent is what the order of spending chose. Credits that land in an ended block
// expire at once, in an expire row of their own per block naming row i: the customer gets back
// what was theirs and loses only what would have lapsed anyway. Credits that land in a block
// not ended while the account has a debt pay the debt at once, from those blocks in the order of
// spending: a debt is paid by the first credits that reach the account, whatever their way in.
func (a *Account) giveBack(j *Job, i, source int, amount int64) {
	drawn := a.Rows[source].Moves
	var given []int
	for k := len(drawn) - 1; k >= 0 && amount > 0; k-- {
		if drawn[k].Block != Debt || drawn[k].Amount >= 0 {
			continue
		}
		give := min(-drawn[k].Amount, amount)
		a.move(i, Debt, give)
		a.forgive(source, give)
		amount -= give
	}
	for k := len(drawn) - 1; k >= 0 && amount > 0; k-- {
		mv := drawn[k]
		if mv.Block == Debt || mv.Amount >= 0 {
			continue
		}
		give := min(-mv.Amount, amount)
		a.move(i, mv.Block, give)
		j.held[mv.Block] -= give
		given = append(given, mv.Block)
		amount -= give
	}
	for _, b := range ascending(given) {
		if blk := a.Blocks[b]; blk.Ended() {
			a.expireReturned(i, b)
		}
	}
	returnedTo := func(b *Block) bool { return slices.Contains(given, slices.Index(a.Blocks, b)) }
	for _, b := range a.spendingOrder(returnedTo) {
		a.payDebt(i, b)
	}
}

// forgive takes give credits off the debt the source row made: its own job's release gives them
// back.
func (a *Account) forgive(source int, give int64) {
	for k, d := range a.Debts {
		if d.Row == source {
			d.Amount -= give
			if d.Amount == 0 {
				a.Debts = append(a.Debts[:k], a.Debts[k+1:]...)
			}
			return
		}
	}
}

// expireReturned removes the credits row i returned to ended block b, in an expire row naming i.
func (a *Account) expireReturned(i, b int) {
	var give int64
	for _, mv := range a.Rows[i].Moves {
		if mv.Block == b {
			give += mv.Amount
		}
	}
	give = min(give, a.Blocks[b].Remaining)
	if give <= 0 {
		return
	}
	e := a.write(&Row{Kind: Expire, Amount: -give, Block: b, CausedBy: i})
	a.move(e, b, -give)
	a.Revenue.lapsed(a.Blocks[b], give)
}

// ascending answers the blocks in the order they were made, each once.
func ascending(blocks []int) []int {
	out := slices.Clone(blocks)
	slices.Sort(out)
	return slices.Compact(out)
}
