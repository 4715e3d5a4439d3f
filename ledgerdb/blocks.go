package ledgerdb

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
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
	// they count in the balance but cannot pay for a job. A start in the past is allowed: the
	// credits are spendable at once.
	EffectiveAt *time.Time
	// ExpiresAt is when what remains of the block expires; never when nil. It must be after
	// EffectiveAt, and a new grant's must be in the future (the ledger checks that against its
	// own clock, after it has answered a repeat of the key, whose expiry may have passed since).
	ExpiresAt *time.Time
	// CostBasis is what the customer paid per credit, a decimal in the currency's main unit
	// ("0.01"), below 10^20 with at most 18 decimals; paid blocks only, empty when unknown.
	CostBasis string
}

// category answers the block's category, paid by default.
func (t BlockTerms) category() BlockCategory {
	if t.Category == "" {
		return CategoryPaid
	}
	return t.Category
}

// Validate checks what of the terms holds whenever they are sent: a known category, an expiry
// after a given start, and a cost basis only on a paid block, a decimal below 10^20 with at most 18 decimals. Whether
// the expiry has passed is the ledger's to check (ledger_post): the same terms again are a
// repeat of the grant, answered as such after the expiry too.
func (t BlockTerms) Validate() error {
	switch t.category() {
	case CategoryPaid, CategoryPromotional:
	default:
		return &InvalidInputError{Field: "category", Reason: fmt.Sprintf("is %q; it must be %q or %q", t.Category, CategoryPaid, CategoryPromotional)}
	}
	if t.ExpiresAt != nil && t.EffectiveAt != nil && !t.ExpiresAt.After(*t.EffectiveAt) {
		return &InvalidInputError{Field: "expires_at", Reason: fmt.Sprintf("is %s; it must be after the block's start, %s",
			t.ExpiresAt.UTC().Format(time.RFC3339), t.EffectiveAt.UTC().Format(time.RFC3339))}
	}
	if t.CostBasis != "" {
		if t.category() != CategoryPaid {
			return &InvalidInputError{Field: "cost_basis", Reason: "is set on a promotional block: only paid credits have a cost"}
		}
		if _, err := parseCostBasis(t.CostBasis); err != nil {
			return err
		}
	}
	return nil
}

// The range of a cost basis: what credit_blocks.cost_basis, numeric(38, 18), keeps exactly.
const (
	// costBasisDecimals is the most decimals a cost basis may have.
	costBasisDecimals = 18
	// costBasisDigits is the most digits before its decimal point: a cost basis is below 10^20.
	costBasisDigits = 20
	// maxCostBasisLength bounds the written form, trailing zeros and an exponent included.
	maxCostBasisLength = 64
)

// costBasisPattern is a non-negative decimal as people and programs write one: digits, an
// optional fraction, an optional exponent (Python's str(1e-07) is "1e-07", a Decimal's "1E+1").
var costBasisPattern = regexp.MustCompile(`^([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$`)

// parseCostBasis reads a cost basis written as a decimal — "0.01", "0.0100", "1e-11", "3.5E-07" —
// and answers it exactly, in the plain form the ledger stores and shows ("0.00000000001"), or an
// [*InvalidInputError] naming cost_basis: for anything that is no non-negative decimal (a
// fraction such as "1/3", hex, NaN, Infinity, a sign, spaces), for more than costBasisDecimals
// decimals — the ledger would keep another number than the one paid, so the caller must round
// it — and for a value of 10^costBasisDigits or more. Its value, not its written form, is what
// a repeat of the grant is compared by: "0.010" repeats "0.01".
func parseCostBasis(s string) (string, error) {
	refuse := func(reason string, args ...any) (string, error) {
		return "", &InvalidInputError{Field: "cost_basis", Reason: fmt.Sprintf(reason, args...)}
	}
	if len(s) > maxCostBasisLength {
		return refuse("is %d characters long; a cost basis is a decimal such as \"0.01\"", len(s))
	}
	m := costBasisPattern.FindStringSubmatch(s)
	if m == nil {
		return refuse("is %q; it must be a non-negative decimal such as \"0.01\" (an exponent, as in \"1e-7\", may follow)", s)
	}
	// The value is digits × 10^-scale.
	digits, scale := m[1]+m[2], len(m[2])
	if m[3] != "" {
		exp, err := strconv.Atoi(m[3])
		if err != nil || exp > 1<<20 || exp < -(1<<20) { // far past any bound below, and no overflow
			return refuse("is %q; it must be below 10^%d with at most %d decimals", s, costBasisDigits, costBasisDecimals)
		}
		scale -= exp
	}
	digits = strings.TrimLeft(digits, "0")
	for scale > 0 && strings.HasSuffix(digits, "0") {
		digits, scale = digits[:len(digits)-1], scale-1
	}
	switch {
	case digits == "":
		return "0", nil
	case scale > costBasisDecimals:
		return refuse("is %q, which has %d decimals; the ledger keeps at most %d, so round it first", s, scale, costBasisDecimals)
	case len(digits)-scale > costBasisDigits:
		return refuse("is %q; it must be below 10^%d", s, costBasisDigits)
	case scale <= 0:
		return digits + strings.Repeat("0", -scale), nil
	case scale >= len(digits):
		return "0." + strings.Repeat("0", scale-len(digits)) + digits, nil
	}
	return digits[:len(digits)-scale] + "." + digits[len(digits)-scale:], nil
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
	// ExpiredAt is when the expiry pass removed what remained of it, or when a pending block was
	// voided because its payment was confirmed after its expiry (it held nothing); nil before.
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

// trimDecimal drops the trailing zeros a numeric's text pads its scale with: "0.010000000000000000"
// reads "0.01". It changes no digit, so the number read is the number stored.
func trimDecimal(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
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
