package ledgerbench

// The pre-outbox path: the Go side once more, on the same database in the same run, against the
// ledger's money path as it is today less what webhook events need of it — the same schema and
// functions, credit blocks included, in a schema of their own, without the xid column's default
// that records each row's transaction and without the xid indexes. It is not the ledger as it was
// before the outbox (that ledger had no credit blocks): it is the current money path without the
// events' xid, so that Go ÷ pre-outbox is the absolute cost of events on today's money path. The
// lifecycles measured never reject or deliver a job, so the outcome_xid the functions set on those
// paths costs them nothing. Its accounts are prepared as the main ledger's are (prepare), their
// credit blocks with them, and its lifecycles are those of the main run without endpoints,
// fixed+blocks among them.

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/ledgerdb"
)

// preOutboxSchema holds the pre-outbox ledger, beside the benchmarked one in the same database.
const preOutboxSchema = "ledgerbench_pre_outbox"

// preOutbox sets up the pre-outbox ledger (created, migrated and stripped of the events' xid on
// first use), and a bench on it that runs the Go side of main's lifecycles without endpoints,
// prepared with their own accounts, credit blocks and jobs. Its close closes its pool.
func preOutbox(ctx context.Context, main *bench) (*bench, func(), error) {
	fail := func(err error) (*bench, func(), error) {
		return nil, nil, fmt.Errorf("ledgerbench: pre-outbox ledger: %w", err)
	}
	if _, err := main.pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+preOutboxSchema); err != nil {
		return fail(err)
	}
	u, err := url.Parse(main.cfg.DatabaseURL)
	if err != nil {
		return fail(err)
	}
	q := u.Query()
	q.Set("search_path", preOutboxSchema)
	u.RawQuery = q.Encode()
	if err := ledgerdb.Migrate(ctx, u.String()); err != nil {
		return fail(err)
	}
	poolCfg, err := ledgerdb.PoolConfig(u.String())
	if err != nil {
		return fail(err)
	}
	poolCfg.MaxConns = int32(main.cfg.Clients)
	tracer := &roundTrips{}
	poolCfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fail(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE ledger_entries ALTER COLUMN xid DROP DEFAULT;
		DROP INDEX IF EXISTS ledger_entries_xid; DROP INDEX IF EXISTS jobs_outcome_xid`); err != nil {
		pool.Close()
		return fail(err)
	}
	b := &bench{cfg: main.cfg, pool: pool, store: ledgerdb.New(pool), tracer: tracer, out: main.out, prefix: main.prefix,
		dir: main.dir, sides: []string{sideGo}}
	for _, lc := range main.lifecycles {
		if lc.hooked {
			continue
		}
		own := *lc
		own.price = lc.base
		if err := own.setUp(ctx, b.store, b.dir); err != nil {
			pool.Close()
			return nil, nil, err
		}
		b.lifecycles = append(b.lifecycles, &own)
	}
	if err := b.prepare(ctx); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return b, pool.Close, nil
}
