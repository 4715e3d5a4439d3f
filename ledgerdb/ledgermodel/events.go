package ledgermodel

// Event types (docs/design.md, "Webhooks").
const (
	JobCharged     = "job.charged"
	JobRejected    = "job.rejected"
	JobDelivered   = "job.delivered"
	JobRefunded    = "job.refunded"
	JobReclaimed   = "job.reclaimed"
	BalanceLow     = "balance.low"
	CreditGranted  = "credit.granted"
	CreditExpired  = "credit.expired"
	TopUpRequested = "topup.requested"
)

// Event is an event derived from the ledger: its type, the row it was derived from (-1 for
// job.delivered and job.rejected, derived from the job), its job, and what a top-up request
// asked.
type Event struct {
	Type   string
	Row    int
	Job    string
	Amount int64
}

// Events answers every event the account's rows and jobs make, once the derive pass has read them
// (an account with an endpoint from its opening): a job's charge, refund and reclaim rows, its
// delivery and its rejection; a debit crossing the low-balance threshold; a grant that made a
// block; every expiry; and the top-ups asked (DeriveTopUps).
func (a *Account) Events() []Event {
	var out []Event
	for i, r := range a.Rows {
		switch r.Kind {
		case Charge:
			out = append(out, Event{Type: JobCharged, Row: i, Job: r.Job})
		case Refund:
			out = append(out, Event{Type: JobRefunded, Row: i, Job: r.Job})
		case Reclaim:
			out = append(out, Event{Type: JobReclaimed, Row: i, Job: r.Job})
		case Grant:
			out = append(out, Event{Type: CreditGranted, Row: i})
		case Expire:
			out = append(out, Event{Type: CreditExpired, Row: i})
		}
		if a.crossesLow(i) {
			out = append(out, Event{Type: BalanceLow, Row: i})
		}
		if amount, ok := a.TopUpRequests[i]; ok {
			out = append(out, Event{Type: TopUpRequested, Row: i, Amount: amount})
		}
	}
	for id, j := range a.Jobs {
		state := j.State
		if state == Deleted {
			state = j.Before
		}
		switch {
		case state == Rejected:
			out = append(out, Event{Type: JobRejected, Row: -1, Job: id})
		case state == Delivered:
			out = append(out, Event{Type: JobDelivered, Row: -1, Job: id})
		}
	}
	return out
}

// crossesLow says row i is a balance.low: a spend whose balance after (a reclaim's after its
// release) is below the threshold while the balance before was not — once per crossing. An expiry
// a return caused never is one: together they never take the balance below where it stood.
func (a *Account) crossesLow(i int) bool {
	if a.LowBalance == nil || !a.Rows[i].spends() {
		return false
	}
	before, after := a.around(i)
	return before >= *a.LowBalance && after < *a.LowBalance
}
