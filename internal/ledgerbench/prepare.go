package ledgerbench

// The set-up before any timing: accounts, grants and placeholder jobs in bulk.

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobbill/jobbill/ledgerdb"
)

// prepare opens each side's accounts for each lifecycle with a grant and writes every round's
// placeholder jobs, in bulk and before any timing, so that neither side pays for set-up. The rows
// are what the API would write: a grant row with its balance_after; a submitting job at its
// kind's current price, holding the kind's maximum of units (cost = unit price × held units,
// as the schema's jobs_price_recorded check requires), with its fingerprint and an empty request.
func (b *bench) prepare(ctx context.Context) error {
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, lc := range b.lifecycles {
			for _, side := range b.sides {
				ids := make([]string, b.cfg.Accounts)
				for i := range ids {
					ids[i] = b.accountID(side, lc, i)
				}
				if _, err := tx.Exec(ctx, `INSERT INTO accounts (id, balance) SELECT unnest($1::text[]), $2`, ids, grantPerAccount); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `
					INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, memo)
					SELECT unnest($1::text[]), 'grant', $2, $2, 'ledgerbench', 'ledgerbench opening grant'`, ids, grantPerAccount); err != nil {
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
							sub := ledgerdb.Submission{JobID: key.JobID, AccountID: key.AccountID, Kind: p.Kind}
							jobs = append(jobs, []any{key.String(), sub.AccountID, p.Hold(), sub.Fingerprint(),
								p.Kind, int32(p.Version), string(p.Unit), p.UnitPrice, p.MaxUnits})
							requests = append(requests, []any{key.String(), []byte{}})
						}
					}
				}
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"},
			[]string{"id", "account_id", "cost", "request_fingerprint", "kind", "price_version", "unit", "unit_price", "held_units"},
			pgx.CopyFromRows(jobs)); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"job_requests"}, []string{"job_id", "request"}, pgx.CopyFromRows(requests))
		return err
	})
	if err != nil {
		return fmt.Errorf("ledgerbench: preparing accounts and jobs: %w", err)
	}
	// Fresh statistics, so that both sides are planned on the tables as they now are.
	if _, err := b.pool.Exec(ctx, `ANALYZE accounts, jobs, ledger_entries`); err != nil {
		return fmt.Errorf("ledgerbench: analyzing: %w", err)
	}
	return nil
}
