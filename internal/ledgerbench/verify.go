package ledgerbench

// The money checks after the last round: a benchmark that computed wrong money would be worthless.

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"sync"
)

// The verification's queries, each in its file with what it reads.
var (
	//go:embed verify_jobs.sql
	verifyJobsSQL string
	//go:embed verify_balances.sql
	verifyBalancesSQL string
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
	err = b.pool.QueryRow(ctx, verifyJobsSQL,
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
	accounts, err := b.pool.Query(ctx, verifyBalancesSQL,
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
