package ledgerdb

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"
)

// BlockCategory says where a credit block's credits came from.
type BlockCategory string

// The credit block categories.
const (
	// CategoryPaid credits were bought by the customer, at the block's cost basis per credit.
	CategoryPaid BlockCategory = "paid"
	// CategoryPromotional credits were given (sign-up, goodwill): spent before paid ones by
	// default, and never revenue.
	CategoryPromotional BlockCategory = "promotional"
)

// BlockStatus says whether a block's credits can be spent.
type BlockStatus string

// The credit block statuses.
const (
	// BlockActive credits are spendable from the block's start until its expiry.
	BlockActive BlockStatus = "active"
	// BlockPending waits for its payment and holds no credits yet.
	BlockPending BlockStatus = "pending"
	// BlockVoid never held credits: its payment failed.
	BlockVoid BlockStatus = "void"
)

// BlockTerms are the terms of the credit block a grant creates. The zero value is a paid,
// non-expiring block of priority 0, in effect at once, with no cost basis: a grant as it was
// before blocks.
type BlockTerms struct {
	// Category is paid or promotional; paid when empty.
	Category BlockCategory
	// Priority orders blocks of one category: a lower priority is spent first.
	Priority int32
	// EffectiveAt is when the credits become spendable; the grant's time when nil. Until then
	// they count in the balance but cannot pay for a job.
	EffectiveAt *time.Time
	// ExpiresAt is when what remains of the block expires; never when nil. It must be after
	// EffectiveAt and in the future.
	ExpiresAt *time.Time
	// CostBasis is what the customer paid per credit, a decimal in the currency's main unit
	// ("0.01"); paid blocks only, empty when unknown.
	CostBasis string
}

// category answers the block's category, paid by default.
func (t BlockTerms) category() BlockCategory {
	if t.Category == "" {
		return CategoryPaid
	}
	return t.Category
}

// Validate checks the terms as of now: a known category, an expiry after the start and in the
// future, a cost basis only on a paid block and a non-negative decimal.
func (t BlockTerms) Validate(now time.Time) error {
	switch t.category() {
	case CategoryPaid, CategoryPromotional:
	default:
		return &InvalidInputError{Field: "category", Reason: fmt.Sprintf("is %q; it must be %q or %q", t.Category, CategoryPaid, CategoryPromotional)}
	}
	start := now
	if t.EffectiveAt != nil {
		start = *t.EffectiveAt
	}
	if t.ExpiresAt != nil {
		switch {
		case !t.ExpiresAt.After(start):
			return &InvalidInputError{Field: "expires_at", Reason: fmt.Sprintf("is %s; it must be after the block's start, %s",
				t.ExpiresAt.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339))}
		case !t.ExpiresAt.After(now):
			return &InvalidInputError{Field: "expires_at", Reason: fmt.Sprintf("is %s, in the past: a block must expire in the future",
				t.ExpiresAt.UTC().Format(time.RFC3339))}
		}
	}
	if t.CostBasis != "" {
		if t.category() != CategoryPaid {
			return &InvalidInputError{Field: "cost_basis", Reason: "is set on a promotional block: only paid credits have a cost"}
		}
		r, ok := new(big.Rat).SetString(t.CostBasis)
		if !ok || r.Sign() < 0 || len(t.CostBasis) > 32 {
			return &InvalidInputError{Field: "cost_basis", Reason: fmt.Sprintf("is %q; it must be a non-negative decimal such as \"0.01\"", t.CostBasis)}
		}
	}
	return nil
}

// Block is one credit block of an account, as it stands.
type Block struct {
	// ID names the block.
	ID int64
	// AccountID is the account whose credits it holds.
	AccountID string
	// Category is paid or promotional.
	Category BlockCategory
	// Priority orders blocks of one category: lower is spent first.
	Priority int32
	// Amount is what its grant put in (0 for the opening block).
	Amount int64
	// Remaining is what it holds now: Amount plus every move of credits into and out of it.
	Remaining int64
	// EffectiveAt is when its credits became, or become, spendable.
	EffectiveAt time.Time
	// ExpiresAt is when it expires; nil: never.
	ExpiresAt *time.Time
	// CostBasis is what the customer paid per credit, a decimal; empty when unknown.
	CostBasis string
	// Memo is the grant's memo.
	Memo string
	// Key is its grant's idempotency key; empty for the opening block.
	Key string
	// Status says whether its credits can be spent.
	Status BlockStatus
	// Opening marks the block that held the account's credits when blocks began (and takes back
	// credits drawn before them).
	Opening bool
	// ExpiredAt is when the expiry pass removed what remained of it; nil before.
	ExpiredAt *time.Time
	// CreatedAt is when it was granted.
	CreatedAt time.Time
}

// Spendable reports whether the block's credits can pay for a job at t.
func (b Block) Spendable(t time.Time) bool {
	return b.Status == BlockActive && b.Remaining > 0 && !b.EffectiveAt.After(t) && (b.ExpiresAt == nil || b.ExpiresAt.After(t))
}

// blockColumns are the columns scanBlock reads, in its order.
const blockColumns = `id, account_id, category, priority, amount, remaining, effective_at, expires_at,
	coalesce(cost_basis::text, ''), coalesce(memo, ''), coalesce(idempotency_key, ''), status, is_opening, expired_at, created_at`

func scanBlock(row pgx.CollectableRow) (Block, error) {
	var b Block
	var category, status string
	err := row.Scan(&b.ID, &b.AccountID, &category, &b.Priority, &b.Amount, &b.Remaining, &b.EffectiveAt, &b.ExpiresAt,
		&b.CostBasis, &b.Memo, &b.Key, &status, &b.Opening, &b.ExpiredAt, &b.CreatedAt)
	b.Category, b.Status = BlockCategory(category), BlockStatus(status)
	b.CostBasis = trimDecimal(b.CostBasis)
	return b, err
}

// trimDecimal drops the trailing zeros numeric(20, 10) pads a cost basis with: "0.0100000000"
// reads "0.01".
func trimDecimal(s string) string {
	if s == "" {
		return s
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	out := r.FloatString(10)
	for len(out) > 1 && out[len(out)-1] == '0' {
		out = out[:len(out)-1]
	}
	if out[len(out)-1] == '.' {
		out = out[:len(out)-1]
	}
	return out
}

// Blocks lists an account's credit blocks in the order of spending — promotional before paid,
// then lower priority, then sooner expiry (none last), then older — the opening block among
// them. An unknown account is [ErrUnknownAccount].
func (s *Store) Blocks(ctx context.Context, accountID string) ([]Block, error) {
	if _, err := s.Balance(ctx, accountID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+blockColumns+` FROM credit_blocks WHERE account_id = $1
		ORDER BY category = 'paid', priority, expires_at NULLS LAST, created_at, id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("account %q: reading its credit blocks: %w", accountID, translateError(err))
	}
	blocks, err := pgx.CollectRows(rows, scanBlock)
	if err != nil {
		return nil, fmt.Errorf("account %q: reading its credit blocks: %w", accountID, translateError(err))
	}
	return blocks, nil
}

// Expiry is what one block's expiry removed: its expire row.
type Expiry struct {
	// AccountID is the block's account.
	AccountID string
	// BlockID is the block that expired.
	BlockID int64
	// EntryID is the expire row.
	EntryID int64
	// Amount is what it removed (negative).
	Amount int64
	// BalanceAfter is the account's balance after it.
	BalanceAfter int64
}

// MaxExpiriesPerCall bounds one [Store.ExpireBlocks] call, so that one transaction never holds
// the locks of many accounts for long.
const MaxExpiriesPerCall = 500

// ExpireBlocks expires up to limit blocks whose expiry has passed, the soonest first: what remains
// of each is removed by one expire row, exactly once whoever calls it and however often. It
// answers the rows written (a block that held nothing is marked expired with none) and whether
// blocks may remain due: call again until it says none do.
func (s *Store) ExpireBlocks(ctx context.Context, limit int) (expiries []Expiry, more bool, err error) {
	if limit <= 0 || limit > MaxExpiriesPerCall {
		return nil, false, &InvalidInputError{Field: "limit", Reason: fmt.Sprintf("is %d; it must be 1 to %d", limit, MaxExpiriesPerCall)}
	}
	err = ResendOnDeadlock(func() error {
		expiries = nil
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT account_id, block_id, entry_id, amount, balance_after FROM ledger_expire_blocks($1)`, int32(limit))
			if err != nil {
				return err
			}
			expiries, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Expiry, error) {
				var e Expiry
				err := row.Scan(&e.AccountID, &e.BlockID, &e.EntryID, &e.Amount, &e.BalanceAfter)
				return e, err
			})
			if err != nil {
				return err
			}
			return tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM credit_blocks WHERE expired_at IS NULL
				AND expires_at IS NOT NULL AND expires_at <= now() AND status = 'active')`).Scan(&more)
		})
	})
	if err != nil {
		return nil, false, fmt.Errorf("expiring credit blocks: %w", translateError(err))
	}
	return expiries, more, nil
}
