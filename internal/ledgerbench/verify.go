package ledgerbench

// The money checks after the last round: a benchmark that computed wrong money would be worthless.

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// verify checks the money of every side of every lifecycle after the last round: every job
// recovered at the benchmark's price (and, metered, settled at the usage its side reported), with
// exactly one charge, refund and reclaim row of its hold and, metered, one release row of the
// unused part (the reversing-pairs rule); every account's balance equal to the sum of its rows
// (the sum-of-rows rule) and to its grant less what its jobs should be charged, with ledgerdb's own
// Audit clean (which replays the credit blocks too); every row's credit-block moves what the
// ledger functions would have written (verifyBlocks), the several-block lifecycle's draws crossing
// from block to block on every side; and the blocks of each side holding as much in all as the
// other side's. A benchmark that computed wrong money would be worthless.
func (b *bench) verify(ctx context.Context) (Verification, error) {
	var v Verification
	wantJobs := b.cfg.Rounds * b.cfg.Clients * b.cfg.Lifecycles
	for _, lc := range b.lifecycles {
		held := map[string]int64{}
		for _, side := range b.sides {
			jobs, rows, err := b.verifyJobs(ctx, side, lc, wantJobs)
			if err != nil {
				return v, err
			}
			ids, err := b.verifyBalances(ctx, side, lc)
			if err != nil {
				return v, err
			}
			if err := b.audit(ctx, ids); err != nil {
				return v, err
			}
			blocks, crossings, sideHeld, err := b.verifyBlocks(ctx, side, lc, ids)
			if err != nil {
				return v, err
			}
			if lc.blocks && crossings == 0 {
				return v, fmt.Errorf("ledgerbench: BLOCK CHECK FAILED on the %s accounts of side %s: no charge or reclaim drew from more than one block; the blocks are sized to make them",
					lc.label(), side)
			}
			held[side] = sideHeld
			v.Blocks += blocks
			if lc.blocks {
				v.CrossingDraws += crossings
			}
			if lc.hooked {
				evs, err := b.verifyEvents(ctx, side, lc, wantJobs)
				if err != nil {
					return v, err
				}
				v.Events += evs
			}
			if lc.name == Metered {
				v.MeteredJobs, v.MeteredRows = v.MeteredJobs+jobs, v.MeteredRows+rows
			} else {
				v.FixedJobs, v.FixedRows = v.FixedJobs+jobs, v.FixedRows+rows
			}
			v.Accounts += len(ids)
		}
		for _, side := range b.sides {
			if held[side] != held[b.sides[0]] {
				return v, fmt.Errorf("ledgerbench: BLOCK CHECK FAILED on the %s accounts: the blocks of side %s hold %d credits in all, those of side %s %d",
					lc.label(), b.sides[0], held[b.sides[0]], side, held[side])
			}
		}
	}
	return v, nil
}

// verifyJobs checks every job of a side and lifecycle, and answers how many there are and how
// many ledger rows they have. The ledger keys a job as <account>/<job ID>, so the side's jobs are
// those whose ID, after their account's, starts with the side's prefix; each must be on the
// account accountIndex gives its client and n (a job the raw side found on another account than
// the Go side put it would not have been found at all). A metered job's expected usage is read
// back from its ID (n, its last part, mod the hold), the same number both sides reported.
func (b *bench) verifyJobs(ctx context.Context, side string, lc *lifecycle, wantJobs int) (jobs, rows int, err error) {
	p := lc.price
	var sound, charges, refunds, reclaims, releases, badJobs int
	err = b.pool.QueryRow(ctx, `
		WITH p AS (
			SELECT $1::text AS prefix, $2::text AS kind, $3::integer AS version, $4::text AS unit,
			       $5::bigint AS unit_price, $6::bigint AS held, $7::boolean AS metered,
			       $8::text AS accounts_prefix, $9::bigint AS accounts, $10::bigint AS stride
		), j AS (
			SELECT jobs.id, jobs.cost, nullif((p.held - w.used) * p.unit_price, 0) AS release,
			       jobs.account_id = p.accounts_prefix || ((w.client + w.n * p.stride) % p.accounts)::text
			         AND jobs.kind = p.kind AND jobs.price_version = p.version AND jobs.unit = p.unit
			         AND jobs.unit_price = p.unit_price AND jobs.held_units = p.held AND jobs.cost = p.unit_price * p.held
			         AND jobs.state = 'recovered' AND jobs.is_charged AND jobs.is_refunded AND jobs.is_reclaimed
			         AND jobs.is_settled AND jobs.units_used = w.used AS sound
			FROM p, jobs,
			     LATERAL (SELECT split_part(jobs.id, '-', -2)::bigint AS client, split_part(jobs.id, '-', -1)::bigint AS n) k,
			     LATERAL (SELECT k.client, k.n, CASE WHEN p.metered THEN k.n % p.held ELSE p.held END AS used) w
			WHERE starts_with(jobs.account_id, p.accounts_prefix) AND starts_with(jobs.id, jobs.account_id || '/' || p.prefix)
		), e AS (
			SELECT e.job_id, count(*) AS n,
			       sum(e.amount) FILTER (WHERE e.kind = 'charge') AS charge,
			       sum(e.amount) FILTER (WHERE e.kind = 'refund') AS refund,
			       sum(e.amount) FILTER (WHERE e.kind = 'reclaim') AS reclaim,
			       sum(e.amount) FILTER (WHERE e.kind = 'release') AS release
			FROM ledger_entries e JOIN j ON j.id = e.job_id GROUP BY e.job_id
		)
		SELECT (SELECT count(*) FROM j),
		       (SELECT count(*) FROM j WHERE sound),
		       coalesce((SELECT sum(n) FROM e), 0),
		       (SELECT count(charge) FROM e), (SELECT count(refund) FROM e),
		       (SELECT count(reclaim) FROM e), (SELECT count(release) FROM e),
		       (SELECT count(*) FROM j LEFT JOIN e ON e.job_id = j.id
		        WHERE e.n IS DISTINCT FROM 3 + (j.release IS NOT NULL)::int
		           OR e.charge IS DISTINCT FROM -j.cost OR e.refund IS DISTINCT FROM j.cost
		           OR e.reclaim IS DISTINCT FROM -j.cost OR e.release IS DISTINCT FROM j.release)`,
		b.jobsPrefix(side, lc), p.Kind, int32(p.Version), string(p.Unit), p.UnitPrice, p.MaxUnits, lc.name == Metered,
		b.accountsPrefix(side, lc), b.cfg.Accounts, accountStride,
	).Scan(&jobs, &sound, &rows, &charges, &refunds, &reclaims, &releases, &badJobs)
	if err != nil {
		return 0, 0, fmt.Errorf("ledgerbench: verifying the %s jobs of side %s: %w", lc.name, side, err)
	}
	wantReleases := 0
	if lc.name == Metered {
		wantReleases = wantJobs
	}
	if jobs != wantJobs || sound != wantJobs || rows != lc.rows*wantJobs || charges != wantJobs || refunds != wantJobs ||
		reclaims != wantJobs || releases != wantReleases || badJobs != 0 {
		return 0, 0, fmt.Errorf("ledgerbench: MONEY CHECK FAILED on the %s jobs of side %s: want %d jobs, all on the account their client and n give, recovered and settled at %s v%d, with %d rows (%d charges, refunds and reclaims each, %d releases); found %d jobs, %d of them as wanted, %d rows (%d charges, %d refunds, %d reclaims, %d releases), %d jobs whose rows are wrong",
			lc.name, side, wantJobs, p.Kind, p.Version, lc.rows*wantJobs, wantJobs, wantReleases,
			jobs, sound, rows, charges, refunds, reclaims, releases, badJobs)
	}
	return jobs, rows, nil
}

// verifyBalances checks the sum-of-rows rule for every account of a side and lifecycle, and the
// balance its jobs say it should have: its grant less each job's price (fixed) or usage × unit
// price (metered), the usage read back from the job's ID as verifyJobs does; and, every refund
// having been reclaimed, nothing left awaiting a reclaim. It answers the accounts' IDs.
func (b *bench) verifyBalances(ctx context.Context, side string, lc *lifecycle) ([]string, error) {
	p := lc.price
	accounts, err := b.pool.Query(ctx, `
		SELECT a.id, a.balance, a.awaiting_reclaim,
		       (SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e WHERE e.account_id = a.id),
		       $2::bigint - (SELECT coalesce(sum(CASE WHEN $5::boolean
		                                             THEN (split_part(j.id, '-', -1)::bigint % $4::bigint) * $3::bigint
		                                             ELSE $3::bigint * $4::bigint END), 0)
		                     FROM jobs j WHERE j.account_id = a.id)
		FROM accounts a WHERE starts_with(a.id, $1)`,
		b.accountsPrefix(side, lc), grantPerAccount, p.UnitPrice, p.MaxUnits, lc.name == Metered)
	if err != nil {
		return nil, fmt.Errorf("ledgerbench: verifying the %s accounts of side %s: %w", lc.name, side, err)
	}
	var ids, bad []string
	for accounts.Next() {
		var id string
		var balance, awaiting, sum, want int64
		if err := accounts.Scan(&id, &balance, &awaiting, &sum, &want); err != nil {
			accounts.Close()
			return nil, fmt.Errorf("ledgerbench: verifying the %s accounts of side %s: %w", lc.name, side, err)
		}
		ids = append(ids, id)
		if balance != sum || balance != want || awaiting != 0 {
			bad = append(bad, fmt.Sprintf("%s: balance %d, sum of rows %d, grant less jobs %d, awaiting reclaim %d (want 0: every refund was reclaimed)",
				id, balance, sum, want, awaiting))
		}
	}
	if err := accounts.Err(); err != nil {
		return nil, fmt.Errorf("ledgerbench: verifying the %s accounts of side %s: %w", lc.name, side, err)
	}
	if len(ids) != b.cfg.Accounts || len(bad) > 0 {
		return nil, fmt.Errorf("ledgerbench: MONEY CHECK FAILED on the %s accounts of side %s: %d of %d accounts found; wrong balances:\n%s",
			lc.name, side, len(ids), b.cfg.Accounts, strings.Join(bad, "\n"))
	}
	return ids, nil
}

// audit runs ledgerdb's Audit (the balance_after chain, the reversing-pairs, net-effect and
// sum-of-rows rules) on every account, Clients at a time.
func (b *bench) audit(ctx context.Context, ids []string) error {
	work := make(chan string)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for range b.cfg.Clients {
		wg.Go(func() {
			for id := range work {
				report, err := b.store.Audit(ctx, id)
				if err == nil && report.OK() {
					continue
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, err.Error())
				} else {
					failures = append(failures, fmt.Sprintf("%s: %v", id, report.Violations))
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if len(failures) > 0 {
		return fmt.Errorf("ledgerbench: MONEY CHECK FAILED: audit of %d accounts:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	return nil
}
