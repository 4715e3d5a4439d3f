// Package ledgermodel is the executable form of the money rules of docs/design.md: a small model,
// in plain Go, of what the ledger must hold after every operation — each account's balance, its
// credit blocks, its debt, its jobs' money, its rows and their moves across the blocks, the
// top-ups its debits ask for, its statement and its revenue.
//
// It has no SQL, no concurrency and no cleverness: maps, slices and loops, each rule written
// once, in the words of the design, so that a reader can check it against the prose in one
// sitting. Where the model and the prose disagree, one of them is wrong. The ledger's randomized
// test (ledgerdb's TestLedgerHeldToTheModel) drives the real Postgres functions and this model with
// the same operations and compares them after every step.
//
// The model knows no clock. Time is what the test makes of it: a block's start and its expiry
// pass when the test says so ([Model.StartBlock], [Model.PassExpiry]), and the expiry pass runs
// when the test runs it ([Model.ExpiryPass]).
package ledgermodel

import (
	"fmt"
	"math/big"
	"slices"
	"time"
)

// Debt is the block of an account's debt in a row's moves: credits drawn beyond the blocks.
const Debt = -1

// Row kinds, as the ledger names them.
const (
	Grant      = "grant"
	Charge     = "charge"
	Refund     = "refund"
	Reclaim    = "reclaim"
	Release    = "release"
	Adjustment = "adjustment"
	Expire     = "expire"
)

// Block categories.
const (
	Paid        = "paid"
	Promotional = "promotional"
)

// Block statuses.
const (
	Active  = "active"
	Pending = "pending"
	Void    = "void"
)

// Model is every account the test drives, by ID.
type Model struct {
	Accounts map[string]*Account
}

// New answers an empty model.
func New() *Model { return &Model{Accounts: map[string]*Account{}} }

// Account is one account's money.
type Account struct {
	ID string
	// Balance is what the rows add up to (the sum-of-rows rule).
	Balance int64
	// Blocks are the account's credit blocks in the order they were made; a block's number is
	// its index.
	Blocks []*Block
	// Debts are what the account owes beyond its blocks, oldest first: first made, first paid.
	Debts []*DebtOf
	// Rows are the account's ledger rows in the order written.
	Rows []*Row
	// Jobs are the account's jobs by ID.
	Jobs map[string]*Job
	// Keys are the idempotency keys of grants and adjustments: the row each wrote, or, for a
	// pending or void grant, its block.
	Keys map[string]*Posted
	// TopUp is the automatic top-up rule; nil: none.
	TopUp *TopUpRule
	// TopUpRequests is what each row that asked for a top-up asked, by row.
	TopUpRequests map[int]int64
	// toppedTo is how many rows the derive pass has read.
	toppedTo int
	// LowBalance is the threshold of balance.low; nil: none.
	LowBalance *int64
	// Revenue is the running sums of the revenue report's classes.
	Revenue Revenue
}

// Block is a credit block.
type Block struct {
	Category  string
	Priority  int32
	Amount    int64
	Remaining int64
	// ExpiresAt orders blocks by expiry (sooner first, nil last); the model never reads the
	// clock, so it only orders.
	ExpiresAt *time.Time
	// Started says its start has passed: its credits can be spent.
	Started bool
	// TimePassed says its expiry has passed: its credits can no longer be spent, and credits
	// returned to it expire at once.
	TimePassed bool
	// Expired says the expiry pass removed what remained of it.
	Expired bool
	Status  string
	// CostBasis is what a credit of a paid block cost; nil when unknown (worth nothing).
	CostBasis *big.Rat
	// Opening marks the account's opening block (standing credits: positive adjustments).
	Opening bool
	Key     string
}

// Ended says the block can hold no credits any more: void, removed by the pass, or past its
// expiry. Credits returned to an ended block expire at once.
func (b *Block) Ended() bool { return b.Status == Void || b.Expired || b.TimePassed }

// spendable says a charge may draw from the block: active, started, not ended.
func (b *Block) spendable() bool { return b.Status == Active && b.Started && !b.Ended() }

// waiting says the block is active and not ended, but not started: its credits count in the
// balance and pay a debt, but no charge.
func (b *Block) waiting() bool { return b.Status == Active && !b.Started && !b.Ended() }

// DebtOf is one debt: what a row drew on the debt and no credits have paid yet.
type DebtOf struct {
	// Row is the row that made it (a reclaim or a negative adjustment).
	Row    int
	Amount int64
}

// Row is a ledger row.
type Row struct {
	Kind   string
	Amount int64
	// Job is the job of a charge, refund, reclaim or release.
	Job string
	// Block is the block a grant made or an expiry removed credits from; Debt (-1) otherwise.
	Block int
	// CausedBy is, for an expiry a return caused, the returning row's index; -1 otherwise.
	CausedBy int
	// Moves are the row's moves of credits across the blocks and the debt, in order.
	Moves []Move
}

// Move is credits of a row moved into (positive) or out of a block, or on the debt (Debt).
type Move struct {
	Block  int
	Amount int64
}

// Posted is what an idempotency key of a grant or adjustment holds.
type Posted struct {
	Kind   string
	Amount int64
	// Block is the block a grant made; -1 for an adjustment.
	Block int
}

// Open opens an account with no credits and its opening block, empty. Opening it again changes
// nothing.
func (m *Model) Open(id string) *Account {
	if a, ok := m.Accounts[id]; ok {
		return a
	}
	a := &Account{ID: id, Jobs: map[string]*Job{}, Keys: map[string]*Posted{}}
	a.openingBlock()
	m.Accounts[id] = a
	return a
}

// Debt is the account's debt: what its rows drew beyond its blocks and nothing has paid yet.
func (a *Account) Debt() int64 {
	var d int64
	for _, x := range a.Debts {
		d += x.Amount
	}
	return d
}

// Spendable is what a charge can draw now.
func (a *Account) Spendable() int64 {
	var s int64
	for _, b := range a.Blocks {
		if b.spendable() {
			s += b.Remaining
		}
	}
	return s
}

// write appends a row, moves the balance by its amount and answers its index.
func (a *Account) write(r *Row) int {
	a.Balance += r.Amount
	a.Rows = append(a.Rows, r)
	return len(a.Rows) - 1
}

// move records a move of row i and applies it to its block.
func (a *Account) move(i, block int, amount int64) {
	if amount == 0 {
		return
	}
	a.Rows[i].Moves = append(a.Rows[i].Moves, Move{Block: block, Amount: amount})
	if block != Debt {
		a.Blocks[block].Remaining += amount
	}
}

// spendingOrder answers the blocks that pass keep, in the order of spending: promotional before
// paid, then the lower priority, then the sooner expiry (never last), then the older block.
func (a *Account) spendingOrder(keep func(*Block) bool) []int {
	var out []int
	for i, b := range a.Blocks {
		if keep(b) {
			out = append(out, i)
		}
	}
	before := func(x, y *Block, xi, yi int) bool {
		if (x.Category == Paid) != (y.Category == Paid) {
			return y.Category == Paid
		}
		if x.Priority != y.Priority {
			return x.Priority < y.Priority
		}
		switch {
		case x.ExpiresAt == nil && y.ExpiresAt != nil:
			return false
		case x.ExpiresAt != nil && y.ExpiresAt == nil:
			return true
		case x.ExpiresAt != nil && !x.ExpiresAt.Equal(*y.ExpiresAt):
			return x.ExpiresAt.Before(*y.ExpiresAt)
		}
		return xi < yi
	}
	// Insertion sort: a handful of blocks, and nothing to get wrong.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && before(a.Blocks[out[j]], a.Blocks[out[j-1]], out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// draw takes amount credits for row i from the blocks pass keeps, in the order of spending, and
// answers what they could not cover.
func (a *Account) draw(i int, amount int64, keep func(*Block) bool) int64 {
	for _, b := range a.spendingOrder(keep) {
		take := min(a.Blocks[b].Remaining, amount)
		if take > 0 {
			a.move(i, b, -take)
			amount -= take
		}
	}
	return amount
}

// drawIntoDebt is the draw that is never refused (a reclaim, a negative adjustment): the
// spendable blocks, then the blocks not started yet (a debt is owed now, and the first credits
// the account holds pay it), then the debt.
func (a *Account) drawIntoDebt(i int, amount int64) {
	rest := a.draw(i, amount, (*Block).spendable)
	rest = a.draw(i, rest, (*Block).waiting)
	if rest > 0 {
		a.move(i, Debt, -rest)
		a.Debts = append(a.Debts, &DebtOf{Row: i, Amount: rest})
	}
}

// payDebt pays the account's debt, first made first paid, from block b's credits, in moves of row
// i: a debt is paid by the first credits that reach the account, whatever their way in.
func (a *Account) payDebt(i, b int) {
	blk := a.Blocks[b]
	for len(a.Debts) > 0 && blk.Remaining > 0 && !blk.Ended() && blk.Status == Active {
		d := a.Debts[0]
		pay := min(d.Amount, blk.Remaining)
		a.move(i, b, -pay)
		a.move(i, Debt, pay)
		a.Revenue.payment(a, b, a.Rows[d.Row].Kind, pay)
		d.Amount -= pay
		if d.Amount == 0 {
			a.Debts = a.Debts[1:]
		}
	}
}

// openingBlock answers the account's opening block, made when first needed.
func (a *Account) openingBlock() int {
	for i, b := range a.Blocks {
		if b.Opening {
			return i
		}
	}
	a.Blocks = append(a.Blocks, &Block{Category: Paid, Status: Active, Started: true, Opening: true})
	return len(a.Blocks) - 1
}

// Terms are a grant's block terms.
type Terms struct {
	Category  string
	Priority  int32
	ExpiresAt *time.Time
	// StartsLater makes a block whose start has not passed yet.
	StartsLater bool
	CostBasis   *big.Rat
	// Pending grants a block that holds nothing until its payment is confirmed.
	Pending bool
}

// Outcome is what an operation answers.
type Outcome string

// Outcomes.
const (
	Applied        Outcome = "applied"
	AlreadyApplied Outcome = "already_applied"
	NotApplied     Outcome = "not_applied"
	Conflict       Outcome = "conflict"
	Insufficient   Outcome = "insufficient_credits"
	// Expired is a pending grant paid after its expiry: voided instead.
	Expired Outcome = "expired"
	// Refused is an operation refused for its input: nothing written.
	Refused Outcome = "refused"
	// Gone is a deleted job's ID submitted again.
	Gone Outcome = "gone"
	// NotFound is a key or job the account never had.
	NotFound Outcome = "not_found"
)

// Grant posts a grant of amount credits under key: a block of the terms, the debt paid from it
// first (even when it starts later: the debt is owed now). A pending grant makes its block and
// no row. The same key with the same terms is the same grant; with others, a conflict; the key of
// a pending or void grant buys nothing else.
func (a *Account) Grant(key string, amount int64, t Terms) Outcome {
	if p, ok := a.Keys[key]; ok {
		b := a.Blocks[p.Block]
		same := p.Kind == Grant && p.Amount == amount && b.Category == t.Category && b.Priority == t.Priority &&
			sameTime(b.ExpiresAt, t.ExpiresAt) && sameRat(b.CostBasis, t.CostBasis)
		switch {
		case p.Kind != Grant || !same:
			return Conflict
		case b.Status == Void, b.Status == Pending && !t.Pending:
			return Conflict
		}
		return AlreadyApplied
	}
	if amount <= 0 {
		return Refused
	}
	b := &Block{Category: t.Category, Priority: t.Priority, Amount: amount, ExpiresAt: t.ExpiresAt,
		Started: !t.StartsLater, Status: Active, CostBasis: t.CostBasis, Key: key}
	a.Blocks = append(a.Blocks, b)
	bi := len(a.Blocks) - 1
	a.Keys[key] = &Posted{Kind: Grant, Amount: amount, Block: bi}
	if t.Pending {
		b.Status = Pending
		return Applied
	}
	a.credit(bi, amount)
	return Applied
}

// credit writes the grant row of block bi's amount, moves it in and pays the debt from it.
func (a *Account) credit(bi int, amount int64) {
	i := a.write(&Row{Kind: Grant, Amount: amount, Block: bi, CausedBy: -1})
	a.move(i, bi, amount)
	a.Revenue.granted(a.Blocks[bi], amount)
	a.payDebt(i, bi)
}

// SettlePending confirms (paid) or fails a pending grant. Paid, its row is written now, the debt
// paid first; failed, the block is void. Paid after its block's expiry passed, it is void and
// marked expired instead — its credits would lapse at once — and says so (Expired), to every
// later confirmation too. A grant settled before answers AlreadyApplied when settled the same
// way, Conflict otherwise.
func (a *Account) SettlePending(key string, paid bool) Outcome {
	p, ok := a.Keys[key]
	if !ok || p.Kind != Grant {
		return NotFound
	}
	b := a.Blocks[p.Block]
	switch {
	case b.Status == Void && b.Expired && paid:
		return Expired
	case b.Status != Pending:
		if (b.Status == Active) == paid {
			return AlreadyApplied
		}
		return Conflict
	case !paid:
		b.Status = Void
		return Applied
	case b.TimePassed:
		b.Status, b.Expired = Void, true
		return Expired
	}
	b.Status = Active
	a.credit(p.Block, b.Amount)
	return Applied
}

// Adjust posts an operator's correction: a positive one joins the opening block and pays the
// debt first; a negative one draws like a reclaim, never refused.
func (a *Account) Adjust(key string, amount int64) Outcome {
	if p, ok := a.Keys[key]; ok {
		if p.Kind == Adjustment && p.Amount == amount {
			return AlreadyApplied
		}
		return Conflict
	}
	if amount == 0 {
		return Refused
	}
	i := a.write(&Row{Kind: Adjustment, Amount: amount, Block: Debt, CausedBy: -1})
	a.Keys[key] = &Posted{Kind: Adjustment, Amount: amount, Block: -1}
	if amount > 0 {
		b := a.openingBlock()
		a.move(i, b, amount)
		a.Revenue.adjusted(a.Blocks[b], amount)
		a.payDebt(i, b)
		return Applied
	}
	a.drawIntoDebt(i, -amount)
	for _, mv := range a.Rows[i].Moves {
		if mv.Block != Debt {
			a.Revenue.adjusted(a.Blocks[mv.Block], mv.Amount)
		}
	}
	return Applied
}

// StartBlock makes block b's start pass: its credits become spendable.
func (a *Account) StartBlock(b int) { a.Blocks[b].Started = true }

// PassExpiry makes block b's expiry pass, at the moment given: its credits can no longer be
// spent. (A block that never expired is given this expiry, as the test does in the ledger.)
func (a *Account) PassExpiry(b int, at time.Time) {
	a.Blocks[b].TimePassed = true
	a.Blocks[b].ExpiresAt = &at
}

// ExpiryPass removes what remains of every active block of the account whose expiry has passed,
// the soonest expired first, one expire row per block, and marks it expired (a block emptied
// before its expiry with no row). Pending and void blocks hold nothing and are left as they are.
func (a *Account) ExpiryPass() {
	var due []int
	for bi, b := range a.Blocks {
		if b.TimePassed && !b.Expired && b.Status == Active {
			due = append(due, bi)
		}
	}
	slices.SortStableFunc(due, func(x, y int) int { return a.Blocks[x].ExpiresAt.Compare(*a.Blocks[y].ExpiresAt) })
	for _, bi := range due {
		b := a.Blocks[bi]
		if b.Remaining > 0 {
			i := a.write(&Row{Kind: Expire, Amount: -b.Remaining, Block: bi, CausedBy: -1})
			a.Revenue.lapsed(b, b.Remaining)
			a.move(i, bi, -b.Remaining)
		}
		b.Expired = true
	}
}

func sameTime(x, y *time.Time) bool {
	if x == nil || y == nil {
		return x == nil && y == nil
	}
	return x.Equal(*y)
}

func sameRat(x, y *big.Rat) bool {
	if x == nil || y == nil {
		return x == nil && y == nil
	}
	return x.Cmp(y) == 0
}

// String tells the account's money in one line, for failures.
func (a *Account) String() string {
	s := fmt.Sprintf("balance %d debt %d blocks", a.Balance, a.Debt())
	for i, b := range a.Blocks {
		s += fmt.Sprintf(" [%d %s/%s %d]", i, b.Category, b.Status, b.Remaining)
	}
	return s
}
