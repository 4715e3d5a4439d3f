package chaos

// The checks of the credit mix at rest: each run account audited, each block whose expiry passed
// removed by the expiry pass, each pending grant settled as the run settled it, each top-up
// request paid once within the month's cap, and the revenue report reconciling.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb"
)

// The kinds of the credit mix's own violations, reported beside the invariant checker's.
const (
	// ViolationAudit: ledgerdb's audit of a run account found a broken rule (among them a block
	// spent before its start or after its expiry).
	ViolationAudit invariants.Kind = "audit"
	// ViolationBlockExpiry: a block whose expiry passed in the run was not removed by exactly one
	// expire row of the pass (when it held credits), still holds some, or has an expire row that
	// does not name the return it took back.
	ViolationBlockExpiry invariants.Kind = "block_expiry"
	// ViolationPendingGrant: a confirmed pending grant did not write exactly one grant row, or a
	// failed one wrote any.
	ViolationPendingGrant invariants.Kind = "pending_grant"
	// ViolationTopUp: a topup.requested event not paid by exactly one grant of its amount under its
	// key, or a grant under a top-up key nobody asked for.
	ViolationTopUp invariants.Kind = "topup"
	// ViolationTopUpCap: a month's top-up requests ask for more than the rule's cap.
	ViolationTopUpCap invariants.Kind = "topup_cap"
	// ViolationRevenue: the revenue report of an account does not reconcile, does not chain
	// across two periods, or disagrees with the account's paid blocks.
	ViolationRevenue invariants.Kind = "revenue"
)

// CreditTotals is what the credit mix did in a run, read from the ledger at rest.
type CreditTotals struct {
	// BlocksGranted counts the blocks the run's grants made, pending and top-up ones included.
	BlocksGranted int
	// BlocksExpired counts the blocks whose expiry passed in the run and whose remaining credits
	// the expiry pass removed with its expire row; BlocksEmptied those emptied before their expiry
	// (marked expired with no row); CreditsExpired what the pass's rows removed.
	BlocksExpired, BlocksEmptied int
	CreditsExpired               int64
	// ReturnExpiries counts the expire rows a refund or a release caused by bringing credits back
	// to a block already expired.
	ReturnExpiries int
	// PendingConfirmed and PendingVoided count the pending grants confirmed paid and failed.
	PendingConfirmed, PendingVoided int
	// TopUpsRequested counts the topup.requested events, TopUpCredits what they asked for,
	// TopUpsPaid those paid by one grant under their key.
	TopUpsRequested, TopUpsPaid int
	TopUpCredits                int64
	// Deliveries counts the webhook deliveries the receiver took; TopUpPosts the grants it posted
	// and TopUpRepeats those that bought nothing because their key had paid already.
	Deliveries, TopUpPosts, TopUpRepeats int
	// Granted, Recognised and Lapsed are the paid credits of the revenue report over the run,
	// summed over its accounts.
	Granted, Recognised, Lapsed int64
}

// accountCredits is what the checks read of one account.
type accountCredits struct {
	id     string
	blocks []ledgerdb.Block
	rows   map[int64]ledgerdb.Entry
	order  []ledgerdb.Entry
}

// creditsBusy lists what keeps the credit mix from rest: a block whose expiry passed that the
// expiry pass has not removed yet, and a top-up request not paid yet.
func (r *run) creditsBusy(ctx context.Context) ([]string, error) {
	var busy []string
	now := time.Now()
	for _, id := range r.accounts {
		blocks, err := r.ledger.Blocks(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			if b.Status == ledgerdb.BlockActive && b.ExpiresAt != nil && b.ExpiresAt.Before(now) && b.ExpiredAt == nil {
				busy = append(busy, fmt.Sprintf("block %d (%s) of %s expired, not yet removed by the expiry pass", b.ID, b.Key, id))
			}
		}
		if id == r.credits.rule.AccountID {
			more, err := r.topUpsBusy(ctx, blocks)
			if err != nil {
				return nil, err
			}
			busy = append(busy, more...)
		}
	}
	return busy, nil
}

// checkCredits runs the credit mix's checks over every run account and answers their violations
// and what the mix did.
func (r *run) checkCredits(ctx context.Context) ([]invariants.Violation, CreditTotals, error) {
	var out []invariants.Violation
	var t CreditTotals
	for _, id := range r.accounts {
		a, err := r.readCredits(ctx, id)
		if err != nil {
			return nil, t, err
		}
		add := func(kind invariants.Kind, problems []string) {
			for _, p := range problems {
				out = append(out, invariants.Violation{Kind: kind, AccountID: id, Message: id + ": " + p})
			}
		}
		audit, err := r.ledger.Audit(ctx, id)
		if err != nil {
			return nil, t, err
		}
		add(ViolationAudit, audit.Violations)
		expiries, err := r.checkExpiries(ctx, a, &t)
		if err != nil {
			return nil, t, err
		}
		add(ViolationBlockExpiry, expiries)
		add(ViolationPendingGrant, r.checkPending(a, &t))
		revenue, err := r.checkRevenue(ctx, a, &t)
		if err != nil {
			return nil, t, err
		}
		add(ViolationRevenue, revenue)
		for _, b := range a.blocks {
			if !b.Opening {
				t.BlocksGranted++
			}
		}
		if id == r.credits.rule.AccountID {
			paid, capped, err := r.checkTopUps(ctx, a, &t)
			if err != nil {
				return nil, t, err
			}
			add(ViolationTopUp, paid)
			add(ViolationTopUpCap, capped)
		}
	}
	t.Deliveries, t.TopUpPosts, t.TopUpRepeats = r.credits.receiver.figures()
	return out, t, nil
}

// readCredits reads the account's blocks and every row.
func (r *run) readCredits(ctx context.Context, id string) (accountCredits, error) {
	a := accountCredits{id: id, rows: map[int64]ledgerdb.Entry{}}
	var err error
	if a.blocks, err = r.ledger.Blocks(ctx, id); err != nil {
		return a, err
	}
	page := ledgerdb.HistoryPage{Limit: 1000}
	for {
		h, err := r.ledger.History(ctx, id, page)
		if err != nil {
			return a, err
		}
		for _, e := range h.Entries {
			a.rows[e.ID] = e
			a.order = append(a.order, e)
		}
		if h.NextAfterID == 0 {
			return a, nil
		}
		page.AfterID = h.NextAfterID
	}
}

// grantRows answers the account's grant rows posted under key.
func (a accountCredits) grantRows(key string) []ledgerdb.Entry {
	var out []ledgerdb.Entry
	for _, e := range a.order {
		if e.Kind == ledgerdb.KindGrant && e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// blockMoves answers each block's moves of credits by row: what each row moved into (positive) or
// out of it. They are read from the ledger's table of moves, as the audit reads them: no store
// method answers them one by one.
func (r *run) blockMoves(ctx context.Context, blockIDs []int64) (map[int64]map[int64]int64, error) {
	rows, err := r.ledger.Pool().Query(ctx, `SELECT block_id, entry_id, amount FROM ledger_block_moves
		WHERE block_id = ANY ($1) AND entry_id IS NOT NULL`, blockIDs)
	if err != nil {
		return nil, err
	}
	moves := map[int64]map[int64]int64{}
	var block, entry, amount int64
	_, err = pgx.ForEachRow(rows, []any{&block, &entry, &amount}, func() error {
		if moves[block] == nil {
			moves[block] = map[int64]int64{}
		}
		moves[block][entry] += amount
		return nil
	})
	return moves, err
}

// checkExpiries checks each block of the account whose expiry has passed: the pass marked it
// expired; it holds nothing; at most one expire row of the pass removed what it held (none when
// it was empty), after its expiry; and every other expire row of it names the refund or release
// whose credits, brought back to it, it removed — exactly those.
func (r *run) checkExpiries(ctx context.Context, a accountCredits, t *CreditTotals) ([]string, error) {
	now := time.Now()
	var expired []ledgerdb.Block
	var ids []int64
	for _, b := range a.blocks {
		if b.Status == ledgerdb.BlockActive && b.ExpiresAt != nil && b.ExpiresAt.Before(now) {
			expired, ids = append(expired, b), append(ids, b.ID)
		}
	}
	if len(expired) == 0 {
		return nil, nil
	}
	moves, err := r.blockMoves(ctx, ids)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, b := range expired {
		problems = append(problems, expiryProblems(a, b, moves[b.ID], t)...)
	}
	return problems, nil
}

// expiryProblems checks one expired block against its moves (by row).
func expiryProblems(a accountCredits, b ledgerdb.Block, into map[int64]int64, t *CreditTotals) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("block %d (%s): ", b.ID, b.Key)+fmt.Sprintf(format, args...))
	}
	if b.ExpiredAt == nil {
		bad("its expiry passed at %s, and the expiry pass never removed it", b.ExpiresAt.Format(time.RFC3339Nano))
	}
	if b.Remaining != 0 {
		bad("holds %d credits after its expiry", b.Remaining)
	}
	var pass []ledgerdb.Entry
	for entry := range into {
		e := a.rows[entry]
		if e.Kind != ledgerdb.KindExpire {
			continue
		}
		if e.CausedBy == 0 {
			pass = append(pass, e)
			continue
		}
		cause, ok := a.rows[e.CausedBy]
		switch {
		case !ok || (cause.Kind != ledgerdb.KindRefund && cause.Kind != ledgerdb.KindRelease):
			bad("expire row %d names row %d, which is no refund or release of the account", e.ID, e.CausedBy)
		case into[cause.ID] != -into[e.ID]:
			bad("expire row %d removed %d credits, but its return, row %d (%s), brought %d back to the block", e.ID, -into[e.ID], cause.ID, cause.Kind, into[cause.ID])
		default:
			t.ReturnExpiries++
		}
	}
	switch len(pass) {
	case 0:
		// Emptied before its expiry: the pass marks it with no row (its moves, which the audit
		// adds up, and Remaining 0 say it held nothing).
		t.BlocksEmptied++
	case 1:
		if into[pass[0].ID] >= 0 || pass[0].CreatedAt.Before(*b.ExpiresAt) {
			bad("expire row %d (%d credits, at %s) is no removal after its expiry at %s", pass[0].ID, into[pass[0].ID],
				pass[0].CreatedAt.Format(time.RFC3339Nano), b.ExpiresAt.Format(time.RFC3339Nano))
		}
		t.BlocksExpired++
		t.CreditsExpired -= into[pass[0].ID]
	default:
		bad("removed by %d expire rows of the pass; exactly one removes what a block held", len(pass))
	}
	return problems
}

// checkPending checks the account's pending grants as the run settled them: a confirmed one is
// an active block with exactly one grant row, of its amount; a failed one a void block holding
// nothing, with no row.
func (r *run) checkPending(a accountCredits, t *CreditTotals) []string {
	var problems []string
	for _, g := range r.credits.grants[a.id] {
		if !g.pending {
			continue
		}
		var blocks []ledgerdb.Block
		for _, b := range a.blocks {
			if b.Key == g.key {
				blocks = append(blocks, b)
			}
		}
		rows := a.grantRows(g.key)
		switch {
		case len(blocks) != 1:
			problems = append(problems, fmt.Sprintf("pending grant %s made %d blocks", g.key, len(blocks)))
		case g.paid && (blocks[0].Status != ledgerdb.BlockActive || len(rows) != 1 || rows[0].Amount != g.amount):
			problems = append(problems, fmt.Sprintf("pending grant %s of %d, confirmed paid: its block is %s and it wrote %d grant rows (%s)",
				g.key, g.amount, blocks[0].Status, len(rows), amounts(rows)))
		case !g.paid && (blocks[0].Status != ledgerdb.BlockVoid || blocks[0].Remaining != 0 || len(rows) != 0):
			problems = append(problems, fmt.Sprintf("pending grant %s, whose payment failed: its block is %s holding %d and it wrote %d grant rows (%s)",
				g.key, blocks[0].Status, blocks[0].Remaining, len(rows), amounts(rows)))
		case g.paid:
			t.PendingConfirmed++
		default:
			t.PendingVoided++
		}
	}
	return problems
}

// amounts lists the rows' amounts for a message.
func amounts(rows []ledgerdb.Entry) string {
	parts := make([]string, len(rows))
	for i, e := range rows {
		parts[i] = fmt.Sprintf("row %d: %d", e.ID, e.Amount)
	}
	return strings.Join(parts, ", ")
}
