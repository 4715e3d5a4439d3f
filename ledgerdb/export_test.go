package ledgerdb

import "context"

// The limits and helpers below are the package's own: no caller outside it uses them. The
// external tests (package ledgerdb_test) check the rules they keep, and reach them by these names.

const (
	// ClipLength is clipLength: the most bytes ClipText keeps of a text.
	ClipLength = clipLength
	// MaxDeadLetters is maxDeadLetters: the most jobs one Store.DeadLetters read answers.
	MaxDeadLetters = maxDeadLetters
	// MaxExpiredReturnsJobs is maxExpiredReturnsJobs: the most jobs one Store.ExpiredReturns read takes.
	MaxExpiredReturnsJobs = maxExpiredReturnsJobs
	// MaxOutputRefLength is maxOutputRefLength: the longest output reference a result may carry.
	MaxOutputRefLength = maxOutputRefLength
)

// ParseCostBasis is parseCostBasis: how a grant reads a block's cost basis.
func ParseCostBasis(s string) (string, error) { return parseCostBasis(s) }

// RefundReasons is refundReasons: the codes a refund may record.
func RefundReasons() []Reason { return refundReasons() }

// CurrentPrice is currentPrice: the newest price of a kind, which a submission takes.
func (s *Store) CurrentPrice(ctx context.Context, kind string) (Price, error) {
	return s.currentPrice(ctx, kind)
}
