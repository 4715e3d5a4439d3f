package ledgerdb

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
)

// Unit is what a job kind is sold by.
type Unit string

// The units of the price list.
const (
	// UnitJob sells a job whole, at a fixed price: its charge holds one unit and nothing is
	// released.
	UnitJob Unit = "job"
	// UnitGPUSecond meters a job by the second of GPU time it used: its charge holds the kind's
	// (or the client's smaller) maximum, and the settlement releases what the work did not use.
	UnitGPUSecond Unit = "gpu_second"
)

// MaxUnits bounds a kind's maximum units per job: a year of GPU-seconds.
const MaxUnits int64 = 366 * 24 * 3600

// Price is one version of a kind's price.
type Price struct {
	// Kind names what is sold ("render-4k", "transcribe").
	Kind string `json:"kind"`
	// Version counts the kind's prices from 1; a job records the version it was submitted at.
	Version int `json:"version"`
	// Unit is what the kind is sold by.
	Unit Unit `json:"unit"`
	// UnitPrice is the credits one unit costs.
	UnitPrice int64 `json:"unit_price"`
	// MaxUnits is the most units one job may use: what its charge holds (1 for UnitJob).
	MaxUnits int64 `json:"max_units"`
	// Memo says why the price was set (an operator's note).
	Memo string `json:"memo"`
	// CreatedAt is when this version was set.
	CreatedAt time.Time `json:"created_at"`
}

// Hold is what a job of this price holds at its charge when it asks for no smaller maximum.
func (p Price) Hold() int64 { return p.UnitPrice * p.MaxUnits }

// kindPattern is the shape of a kind: lower-case, so that "Render" and "render" are not two
// price lists. The schema's CHECK repeats it.
var kindPattern = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,63}$`)

// ValidateKind checks a job kind's name.
func ValidateKind(kind string) error {
	if !kindPattern.MatchString(kind) {
		return &InvalidInputError{Field: "kind", Reason: fmt.Sprintf("%q must be 1 to 64 lower-case letters, digits and . _ -, starting with a letter", kind)}
	}
	return nil
}

// Validate checks a price before it is set: a known unit, a unit price above zero, a maximum of
// units from 1 (exactly 1 for UnitJob) and a whole hold of at most [MaxAmount] credits.
func (p Price) Validate() error {
	if err := ValidateKind(p.Kind); err != nil {
		return err
	}
	switch p.Unit {
	case UnitJob:
		if p.MaxUnits != 1 {
			return &InvalidInputError{Field: "max units", Reason: fmt.Sprintf("is %d; a kind sold by the job holds exactly 1", p.MaxUnits)}
		}
	case UnitGPUSecond:
		if p.MaxUnits < 1 || p.MaxUnits > MaxUnits {
			return &InvalidInputError{Field: "max units", Reason: fmt.Sprintf("is %d; it must be between 1 and %d", p.MaxUnits, MaxUnits)}
		}
	default:
		return &InvalidInputError{Field: "unit", Reason: fmt.Sprintf("%q is not a unit: %s or %s", p.Unit, UnitJob, UnitGPUSecond)}
	}
	if err := ValidateAmount("unit price", p.UnitPrice); err != nil {
		return err
	}
	if p.UnitPrice > MaxAmount/p.MaxUnits {
		return &InvalidInputError{Field: "unit price", Reason: fmt.Sprintf("%d × %d units is above the largest hold, %d credits", p.UnitPrice, p.MaxUnits, MaxAmount)}
	}
	return ValidateText("memo", p.Memo, MaxTextLength)
}

// SetPrice sets a kind's price as a new version of the price list, which applies to jobs
// submitted after it. A price equal to the kind's latest (unit, unit price and maximum) answers
// AlreadyApplied with that version and writes nothing.
func (s *Store) SetPrice(ctx context.Context, p Price) (Price, Outcome, error) {
	if err := p.Validate(); err != nil {
		return Price{}, "", err
	}
	var (
		outcome string
		row     priceRow
	)
	err := s.queryRow(ctx, func(r pgx.Row) error { return r.Scan(&outcome, &row) },
		`SELECT outcome, price FROM ledger_set_price($1, $2, $3, $4, $5)`, p.Kind, string(p.Unit), p.UnitPrice, p.MaxUnits, p.Memo)
	if err != nil {
		return Price{}, "", fmt.Errorf("setting the price of %q: %w", p.Kind, err)
	}
	return row.price(), Outcome(outcome), nil
}

// Prices lists the price list as it applies to new jobs: each kind's latest version, by kind.
func (s *Store) Prices(ctx context.Context) ([]Price, error) {
	return s.readPrices(ctx, `SELECT DISTINCT ON (kind) p FROM prices p ORDER BY kind, version DESC`)
}

// PriceHistory lists every version of a kind's price, oldest first; [ErrUnknownKind] when it has
// none.
func (s *Store) PriceHistory(ctx context.Context, kind string) ([]Price, error) {
	if err := ValidateKind(kind); err != nil {
		return nil, err
	}
	prices, err := s.readPrices(ctx, `SELECT p FROM prices p WHERE kind = $1 ORDER BY version`, kind)
	if err == nil && len(prices) == 0 {
		err = fmt.Errorf("kind %q: %w", kind, ErrUnknownKind)
	}
	return prices, err
}

// CurrentPrice is the kind's latest price, the one a job submitted now is charged at;
// [ErrUnknownKind] when the kind has none.
func (s *Store) currentPrice(ctx context.Context, kind string) (Price, error) {
	if err := ValidateKind(kind); err != nil {
		return Price{}, err
	}
	prices, err := s.readPrices(ctx, `SELECT p FROM prices p WHERE kind = $1 ORDER BY version DESC LIMIT 1`, kind)
	switch {
	case err != nil:
		return Price{}, err
	case len(prices) == 0:
		return Price{}, fmt.Errorf("kind %q: %w", kind, ErrUnknownKind)
	}
	return prices[0], nil
}

func (s *Store) readPrices(ctx context.Context, query string, args ...any) ([]Price, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading prices: %w", translateError(err))
	}
	prices, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Price, error) {
		var row priceRow
		err := r.Scan(&row)
		return row.price(), err
	})
	if err != nil {
		return nil, fmt.Errorf("reading prices: %w", translateError(err))
	}
	return prices, nil
}

// priceRow is a row of the prices table, its fields in the table's column order, read whole as
// one composite value.
type priceRow struct {
	Kind      string
	Version   int32
	Unit      string
	UnitPrice int64
	MaxUnits  int64
	Memo      string
	CreatedAt time.Time
}

func (r priceRow) price() Price {
	return Price{Kind: r.Kind, Version: int(r.Version), Unit: Unit(r.Unit), UnitPrice: r.UnitPrice,
		MaxUnits: r.MaxUnits, Memo: r.Memo, CreatedAt: r.CreatedAt}
}
