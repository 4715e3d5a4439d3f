package ledgermodel

import "math/big"

// Revenue is what paid credits did, as running sums since the account opened (docs/design.md,
// "Statements and revenue"): each credit valued at its block's cost basis. Paid credits are
// deferred while unspent or held by a job that has not settled; recognised when a job is settled
// (delivered, or recovered by a late result) at what its draws took net of what came back, or
// when they pay a debt a reclaim made; lapsed when they expire; adjusted by an operator's
// correction, or when they pay a debt a negative adjustment made. Promotional credits are never
// revenue: what settled jobs took of them, and what paid a reclaim's debt, is PromotionalSpent.
type Revenue struct {
	Granted, Recognised, Lapsed, Adjusted Money
	PromotionalSpent                      int64
}

// Money is credits and their worth. Amount is never changed in place (every sum is a new
// value), so that a copied snapshot keeps its figures.
type Money struct {
	Credits int64
	Amount  *big.Rat
}

// Worth answers Amount, zero when nothing was ever added.
func (m Money) Worth() *big.Rat {
	if m.Amount == nil {
		return new(big.Rat)
	}
	return m.Amount
}

func (m *Money) add(b *Block, credits int64) {
	m.Credits += credits
	if b.CostBasis != nil {
		worth := new(big.Rat).Mul(b.CostBasis, new(big.Rat).SetInt64(credits))
		m.Amount = worth.Add(worth, m.Worth())
	}
}

func (r *Revenue) granted(b *Block, credits int64) {
	if b.Category == Paid {
		r.Granted.add(b, credits)
	}
}

func (r *Revenue) adjusted(b *Block, credits int64) {
	if b.Category == Paid {
		r.Adjusted.add(b, credits)
	}
}

func (r *Revenue) lapsed(b *Block, credits int64) {
	if b.Category == Paid {
		r.Lapsed.add(b, credits)
	}
}

// payment classes credits of block b that paid a debt by the debt's origin: a reclaim's (work
// delivered and not paid for) is recognised, a negative adjustment's is adjusted, negative.
func (r *Revenue) payment(a *Account, b int, origin string, credits int64) {
	blk := a.Blocks[b]
	switch {
	case origin == Reclaim && blk.Category == Paid:
		r.Recognised.add(blk, credits)
	case origin == Reclaim:
		r.PromotionalSpent += credits
	case blk.Category == Paid:
		r.Adjusted.add(blk, -credits)
	}
}

// recognise makes what a job being settled holds revenue (paid) or promotional spending.
func (r *Revenue) recognise(a *Account, j *Job) {
	for b, credits := range j.held {
		if blk := a.Blocks[b]; blk.Category == Paid {
			r.Recognised.add(blk, credits)
		} else {
			r.PromotionalSpent += credits
		}
		delete(j.held, b)
	}
}

// Deferred is the paid credits unspent now: what paid blocks hold, and what jobs charged and
// neither settled nor refunded hold of them.
func (a *Account) Deferred() Money {
	var m Money
	for _, b := range a.Blocks {
		if b.Category == Paid {
			m.add(b, b.Remaining)
		}
	}
	for _, j := range a.Jobs {
		if j.State != Running {
			continue
		}
		for b, credits := range j.held {
			if blk := a.Blocks[b]; blk.Category == Paid {
				m.add(blk, credits)
			}
		}
	}
	return m
}

// Snapshot is the account's reports' running figures at one moment: a period's figures are the
// difference of two.
type Snapshot struct {
	// Rows is how many rows were written before the moment.
	Rows     int
	Balance  int64
	Revenue  Revenue
	Deferred Money
}

// Snap answers the account's figures now.
func (a *Account) Snap() Snapshot {
	return Snapshot{Rows: len(a.Rows), Balance: a.Balance, Revenue: a.Revenue, Deferred: a.Deferred()}
}

// StatementLine is the rows of one kind in a period: a grant line per block category, a charge
// line per job kind, one line for every other kind.
type StatementLine struct {
	Kind, Category, JobKind string
	Rows, Amount            int64
}

// Statement answers the lines of the rows written between two snapshots; opening + lines =
// closing.
func (a *Account) Statement(from, to Snapshot) map[StatementLine]StatementLine {
	lines := map[StatementLine]StatementLine{}
	for _, r := range a.Rows[from.Rows:to.Rows] {
		key := StatementLine{Kind: r.Kind}
		switch r.Kind {
		case Grant:
			key.Category = a.Blocks[r.Block].Category
		case Charge:
			key.JobKind = a.Jobs[r.Job].Kind
		}
		line := lines[key]
		line.Kind, line.Category, line.JobKind = key.Kind, key.Category, key.JobKind
		line.Rows++
		line.Amount += r.Amount
		lines[key] = line
	}
	return lines
}

// Period is the revenue report between two snapshots.
func Period(from, to Snapshot) Revenue {
	sub := func(x, y Money) Money {
		return Money{Credits: x.Credits - y.Credits, Amount: new(big.Rat).Sub(x.Worth(), y.Worth())}
	}
	return Revenue{
		Granted:          sub(to.Revenue.Granted, from.Revenue.Granted),
		Recognised:       sub(to.Revenue.Recognised, from.Revenue.Recognised),
		Lapsed:           sub(to.Revenue.Lapsed, from.Revenue.Lapsed),
		Adjusted:         sub(to.Revenue.Adjusted, from.Revenue.Adjusted),
		PromotionalSpent: to.Revenue.PromotionalSpent - from.Revenue.PromotionalSpent,
	}
}
