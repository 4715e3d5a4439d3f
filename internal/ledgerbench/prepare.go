package ledgerbench

// The set-up before any timing: accounts, their credit blocks and grants, and placeholder jobs,
// in bulk.

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobbill/jobbill/ledgerdb"
)

// prepareGrantsSQL writes the prepared accounts' opening grants (prepare_grants.sql says how).
//
//go:embed prepare_grants.sql
var prepareGrantsSQL string

// prepare opens each side's accounts for each lifecycle with their grants and writes every round's
// placeholder jobs, in bulk and before any timing, so that neither side pays for set-up. The rows
// are what the API would write: an account with its opening block (ledger_open_account: paid,
// never expiring, 0 credits); for each of the lifecycle's grants (lifecycle.grants) the credit
// block it makes, holding the grant, a grant row naming the block with its balance_after, and the
// row's move of the credits into the block (ledger_post); a submitting job at its kind's current
// price, holding the kind's maximum of units (cost = unit price × held units, as the schema's
// jobs_price_recorded check requires), with its fingerprint and an empty request.
func (b *bench) prepare(ctx context.Context) error {
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, lc := range b.lifecycles {
			for _, side := range b.sides {
				ids := make([]string, b.cfg.Accounts)
				for i := range ids {
					ids[i] = b.accountID(side, lc, i)
				}
				if err := fund(ctx, tx, ids, lc.grants); err != nil {
					return err
				}
				if lc.hooked {
					if err := b.hooks.addEndpoints(ctx, tx, ids); err != nil {
						return err
					}
				}
			}
		}

		var jobs, requests [][]any
		for round := 1; round <= b.cfg.Rounds; round++ {
			for _, lc := range b.lifecycles {
				p := lc.price
				// Both sides spread their jobs over their accounts alike (accountIndex), hence
				// meet the same contention on account rows.
				for _, side := range b.sides {
					for client := range b.cfg.Clients {
						for n := 1; n <= b.cfg.Lifecycles; n++ {
							key := b.jobKey(side, lc, round, client, n)
							jobs = append(jobs, jobRow(key, p))
							requests = append(requests, []any{key.String(), []byte{}})
						}
					}
				}
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"}, jobColumns, pgx.CopyFromRows(jobs)); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"job_requests"}, []string{"job_id", "request"}, pgx.CopyFromRows(requests))
		return err
	})
	if err != nil {
		return fmt.Errorf("ledgerbench: preparing accounts and jobs: %w", err)
	}
	// Fresh statistics, so that both sides are planned on the tables as they now are.
	if _, err := b.pool.Exec(ctx, `ANALYZE accounts, jobs, ledger_entries, credit_blocks, ledger_block_moves`); err != nil {
		return fmt.Errorf("ledgerbench: analyzing: %w", err)
	}
	return nil
}

// jobColumns are the columns of a placeholder job that jobRow fills.
var jobColumns = []string{"id", "account_id", "cost", "request_fingerprint", "kind", "price_version", "unit", "unit_price", "held_units"}

// jobRow is the placeholder job Store.Submit would write for the key at the price (p as the price
// list holds it, its version included), in the order of jobColumns.
func jobRow(key ledgerdb.JobKey, p ledgerdb.Price) []any {
	sub := ledgerdb.Submission{JobID: key.JobID, AccountID: key.AccountID, Kind: p.Kind}
	return []any{key.String(), sub.AccountID, p.Hold(), sub.Fingerprint(),
		p.Kind, int32(p.Version), string(p.Unit), p.UnitPrice, p.MaxUnits}
}

// grant is one of the opening grants of a lifecycle's accounts: the credit block it makes, as
// Store.Grant would make it (in effect at once, priority 0, no cost basis).
type grant struct {
	// key is the grant's idempotency key, on its row and its block.
	key      string
	category ledgerdb.BlockCategory
	amount   int64
	// expiresIn is how long after the set-up the block expires; 0: never.
	expiresIn time.Duration
}

// oneGrant is the opening grant of a single-block lifecycle's accounts: grantPerAccount in one
// paid block that never expires.
func oneGrant() []grant {
	return []grant{{key: "ledgerbench", category: ledgerdb.CategoryPaid, amount: grantPerAccount}}
}

// severalGrants are the opening grants of a several-block lifecycle's accounts, grantPerAccount
// in all: two promotional blocks, spent first, the one expiring sooner before the other, and a
// paid block for the rest. Each promotional block holds about a third of what an account's jobs
// cost over the whole run (jobs is how many jobs each account has, rounded up) plus a quarter of
// a hold, so that it is not a whole number of holds: the run spends the first, draws one charge
// across into the second, spends it, draws across into the paid block and spends the last third
// there, every account holding three blocks in effect through most of the run. The blocks expire
// a year and two years after the set-up, long after any run ends. They are listed (and inserted)
// against their order of spending, so that a draw taking blocks by ID instead of by that order
// would show in the verification.
func severalGrants(jobs int, hold int64) []grant {
	promo := max(int64(jobs)*hold/3, hold) + hold/4
	const year = 365 * 24 * time.Hour
	return []grant{
		{key: "ledgerbench-paid", category: ledgerdb.CategoryPaid, amount: grantPerAccount - 2*promo},
		{key: "ledgerbench-promotional-later", category: ledgerdb.CategoryPromotional, amount: promo, expiresIn: 2 * year},
		{key: "ledgerbench-promotional-sooner", category: ledgerdb.CategoryPromotional, amount: promo, expiresIn: year},
	}
}

// fund opens the accounts and grants each of them the grants, as prepare says, in the set-up's
// transaction. Each account's blocks and grant rows get their IDs in the grants' order, so that
// the rows' balance_after follow their IDs as the audit replays them.
func fund(ctx context.Context, tx pgx.Tx, ids []string, grants []grant) error {
	var total int64
	keys, categories, amounts, expiries := make([]string, len(grants)), make([]string, len(grants)), make([]int64, len(grants)), make([]float64, len(grants))
	for i, g := range grants {
		total += g.amount
		keys[i], categories[i], amounts[i], expiries[i] = g.key, string(g.category), g.amount, g.expiresIn.Seconds()
	}
	if _, err := tx.Exec(ctx, `INSERT INTO accounts (id, balance) SELECT unnest($1::text[]), $2`, ids, total); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO credit_blocks (account_id, category, amount, remaining, is_opening, memo)
		SELECT unnest($1::text[]), 'paid', 0, 0, true, 'credits held when credit blocks began'`, ids); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, prepareGrantsSQL, ids, keys, categories, amounts, expiries)
	return err
}
