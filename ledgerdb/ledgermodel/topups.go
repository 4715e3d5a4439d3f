package ledgermodel

// Top-up modes.
const (
	// Fixed asks for the rule's amount.
	Fixed = "fixed"
	// Target asks for what fills the balance up to the rule's amount.
	Target = "target"
)

// TopUpRule is an account's automatic top-up rule.
type TopUpRule struct {
	Threshold  int64
	Mode       string
	Amount     int64
	MonthlyCap int64
	// Since is how many rows the account had when the rule was made: a debit written before
	// it asks nothing, on a pass or a replay (a rule buys credits for spending after it, never
	// for old spending).
	Since int
}

// SetTopUp sets the account's rule; nil removes it. Changing a rule keeps when it was made; a
// rule made after a removal starts anew.
func (a *Account) SetTopUp(r *TopUpRule) {
	if r != nil {
		r.Since = len(a.Rows)
		if a.TopUp != nil {
			r.Since = a.TopUp.Since
		}
	}
	a.TopUp = r
}

// spends says a row is spending that may ask for a top-up: a charge, a reclaim, a negative
// adjustment, or the expiry pass's expire row — never an expiry a return caused (it removes no
// more than that return brought back), never a row that adds credits.
func (r *Row) spends() bool {
	switch r.Kind {
	case Charge, Reclaim:
		return true
	case Adjustment:
		return r.Amount < 0
	case Expire:
		return r.CausedBy < 0
	}
	return false
}

// DeriveTopUps is the derive pass's part for top-ups: every row written since the last pass that
// asks for one under the rule as it stands now records its request in TopUpRequests. A spend
// asks when it took the balance from at or above the threshold to below it (a reclaim measured
// after the release written with it), for a fixed amount or what fills the balance up to the
// target, within what the month's cap has left (the test runs within one month), and only when
// it was written after the rule was made: a rule buys credits for spending after it, never for
// old spending. What a request asked stays as it was, whatever the rule becomes.
func (a *Account) DeriveTopUps() {
	if a.TopUpRequests == nil {
		a.TopUpRequests = map[int]int64{}
	}
	from := a.toppedTo
	a.toppedTo = len(a.Rows)
	rule := a.TopUp
	if rule == nil {
		return
	}
	var asked int64
	for _, amount := range a.TopUpRequests {
		asked += amount
	}
	for i := from; i < len(a.Rows); i++ {
		before, after := a.around(i)
		r := a.Rows[i]
		if i < rule.Since || !r.spends() || before < rule.Threshold || after >= rule.Threshold {
			continue
		}
		want := rule.Amount
		if rule.Mode == Target {
			want = rule.Amount - after
		}
		want = min(want, rule.MonthlyCap-asked)
		if want > 0 {
			a.TopUpRequests[i] = want
			asked += want
		}
	}
}

// around answers the balance before row i and after it — for a reclaim, after the release its
// job's settlement wrote with it.
func (a *Account) around(i int) (before, after int64) {
	for _, r := range a.Rows[:i] {
		before += r.Amount
	}
	after = before + a.Rows[i].Amount
	if r := a.Rows[i]; r.Kind == Reclaim && i+1 < len(a.Rows) && a.Rows[i+1].Kind == Release && a.Rows[i+1].Job == r.Job {
		after += a.Rows[i+1].Amount
	}
	return before, after
}
