package ledgerdb_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// appRole is the role the service connects as (the schema grants to it by name).
const appRole = "jobbill_app"

// requireAppRole fails the test unless the store connects as the application role: a test of the
// role's limits proves nothing when JOBBILL_TEST_DATABASE_URL points at the owner.
func requireAppRole(t *testing.T, s *ledgerdb.Store) {
	t.Helper()
	var user string
	require.NoError(t, s.Pool().QueryRow(context.Background(), `SELECT current_user`).Scan(&user))
	require.Equal(t, appRole, user, "the tests must connect as the application role (JOBBILL_TEST_DATABASE_URL)")
}

// TestAppRoleCannotRewriteOrAlter checks the append-only rule and the
// remembered-IDs rule at the grants, before any trigger: the application role is refused (42501,
// insufficient_privilege) every direct write — UPDATE, DELETE, TRUNCATE and even INSERT of ledger
// rows, which only the guarded functions may append (the reversing-pairs,
// one-transaction-per-transition, price-list and sum-of-rows rules); UPDATE or DELETE of jobs and
// accounts — and every change of the schema: creating, altering or dropping a table or a function,
// or a schema.
func TestAppRoleCannotRewriteOrAlter(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	requireAppRole(t, s)
	acct, job := charged(t, s, 100, 40)

	for _, stmt := range []string{
		// The append-only rule: ledger rows are never changed or removed.
		`UPDATE ledger_entries SET amount = -1 WHERE job_id = '` + job.String() + `'`,
		`DELETE FROM ledger_entries WHERE job_id = '` + job.String() + `'`,
		`TRUNCATE ledger_entries`,
		// The reversing-pairs, one-transaction-per-transition and sum-of-rows rules: a row or a
		// balance written outside the guarded functions.
		`INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key)
			VALUES ('` + acct + `', 'grant', 1000, 1060, 'forged')`,
		`UPDATE accounts SET balance = 1000000 WHERE id = '` + acct + `'`,
		`INSERT INTO accounts (id) VALUES ('` + ledgertest.ID(t, "forged") + `')`,
		// The price-list and remembered-IDs rules: a job's record and its ID.
		`UPDATE jobs SET state = 'delivered' WHERE id = '` + job.String() + `'`,
		`INSERT INTO jobs (id, account_id, cost, request_fingerprint) VALUES ('` + acct + `/` + ledgertest.ID(t, "forged") + `', '` + acct + `', 1, '\x00')`,
		`DELETE FROM jobs WHERE id = '` + job.String() + `'`,
		`UPDATE job_requests SET request = 'other input' WHERE job_id = '` + job.String() + `'`,
		`DELETE FROM accounts WHERE id = '` + acct + `'`,
		`TRUNCATE jobs CASCADE`,
		`TRUNCATE accounts CASCADE`,
		// The schema.
		`CREATE TABLE app_role_probe (x int)`,
		`CREATE SCHEMA app_role_probe`,
		`ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only`,
		`ALTER TABLE jobs ADD COLUMN app_role_probe int`,
		`DROP TABLE ledger_entries`,
		`DROP FUNCTION ledger_charge(text, bytea)`,
		`CREATE FUNCTION app_role_probe() RETURNS int LANGUAGE sql AS 'SELECT 1'`,
		`CREATE OR REPLACE FUNCTION ledger_job_unmatched(p_job_id text, p_done_states text[], p_as_deleted_from boolean)
			RETURNS ledger_job_result LANGUAGE sql AS 'SELECT NULL::ledger_job_result'`,
		`ALTER FUNCTION ledger_charge(text, bytea) SECURITY INVOKER`,
	} {
		// Each statement runs in a transaction that is rolled back whatever happens, so that a
		// regression of the grants cannot damage the shared test database.
		pgErr := refusal(ctx, t, s.Pool(), stmt)
		require.Equal(t, "42501", pgErr.Code, "%s: %s", stmt, pgErr.Message)
	}
	require.Equal(t, map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -40}, entries(t, s, job))
	ledgertest.RequireBalance(t, s, acct, 60)
}

// TestAppRoleRunsEveryLedgerOperation checks that least privilege takes nothing the service needs:
// as the application role, every operation of the Store works — open, grant, adjust, submit,
// charge, deliver, record an attempt, refund, reclaim, delete, and every read — with the
// net-effect rule (net −cost once delivered, 0 when refunded) and the sum-of-rows rule holding
// after it. (The rest of the suite runs as the same role and covers each operation's edge cases.)
func TestAppRoleRunsEveryLedgerOperation(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	requireAppRole(t, s)

	acct := ledgertest.ID(t, "acct")
	out, err := s.OpenAccount(ctx, acct)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, out)
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: "top-up"})
	require.NoError(t, err)
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -10, Key: "correction"})
	require.NoError(t, err)

	submit := func() ledgerdb.JobKey {
		sub := ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: acct, Kind: ledgertest.Fixed(t, s, 30), Request: []byte(`{}`)}
		tr, err := s.Submit(ctx, sub)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.Applied, tr.Outcome)
		return sub.Key()
	}
	apply := func(tr ledgerdb.Transition, err error) {
		t.Helper()
		require.NoError(t, err)
		require.Equal(t, ledgerdb.Applied, tr.Outcome)
	}

	delivered := submit()
	apply(s.Charge(ctx, delivered))
	apply(s.RecordAttempt(ctx, delivered, 2))
	apply(s.Deliver(ctx, delivered, 2))
	apply(s.Delete(ctx, delivered))

	recovered := submit()
	apply(s.Charge(ctx, recovered))
	apply(s.Refund(ctx, recovered, ledgerdb.ReasonTimedOut, "timed out", 3))
	apply(s.Reclaim(ctx, recovered))

	refunded := submit()
	apply(s.Charge(ctx, refunded))
	apply(s.Refund(ctx, refunded, ledgerdb.ReasonGPUFailed, "failed", 3))

	job, err := s.Job(ctx, delivered)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateDeleted, job.State)
	request, err := s.JobRequest(ctx, recovered)
	require.NoError(t, err)
	require.Equal(t, []byte(`{}`), request)
	history, err := s.History(ctx, acct, ledgerdb.HistoryPage{})
	require.NoError(t, err)
	require.NotEmpty(t, history.Entries)
	snap, err := s.LedgerSnapshot(ctx, ledgerdb.SnapshotScope{AccountID: acct})
	require.NoError(t, err)
	require.Len(t, snap.Jobs, 3)

	// 100 − 10 − 30 (delivered) − 30 (recovered) + 0 (refunded).
	ledgertest.RequireBalance(t, s, acct, 30)
}

// TestAppRolePrivilegesInCatalog checks, in the catalog, the rule the baseline migration and ledgerdb/code/security.sql set for every
// later migration, so that a new table or function cannot quietly widen the application role:
// the append-only rule (the role may write no table, so ledger rows change only through the
// guarded, append-only functions) and the one-transaction-per-transition rule (each money movement
// is one of those functions, one transaction). On every table of the schema the role holds SELECT
// and nothing else; every function it may execute either only reads or is SECURITY DEFINER with its
// search_path pinned, pg_temp last; no SECURITY DEFINER function is executable by PUBLIC; and the
// role may create nothing in the schema or the database, and holds no role attribute that would
// bypass grants. The same holds for API keys: the role reads api_keys (to authenticate) and changes
// them only through ledger_create_api_key and ledger_revoke_api_key (package apikeys tests the
// refusals); and for webhooks: the role changes endpoints, thresholds and delivery bookkeeping only
// through the ledger_webhook_* functions, and cannot write an event at all but by the derive pass,
// which derives events from committed money rows only.
func TestAppRolePrivilegesInCatalog(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	requireAppRole(t, s)
	pool := s.Pool()

	var super, createRole, createDB, bypassRLS bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles WHERE rolname = $1`, appRole).
		Scan(&super, &createRole, &createDB, &bypassRLS))
	require.False(t, super || createRole || createDB || bypassRLS, "the application role needs no role attributes")

	var createInSchema, createInDB bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT has_schema_privilege($1, current_schema(), 'CREATE'),
		has_database_privilege($1, current_database(), 'CREATE')`, appRole).Scan(&createInSchema, &createInDB))
	require.False(t, createInSchema, "the application role may create objects in the schema")
	require.False(t, createInDB, "the application role may create schemas in the database")

	rows, err := pool.Query(ctx, `
		SELECT c.relname,
		       has_table_privilege($1, c.oid, 'SELECT'),
		       has_table_privilege($1, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
		FROM pg_class c
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')`, appRole)
	require.NoError(t, err)
	tables := 0
	for rows.Next() {
		var name string
		var read, write bool
		require.NoError(t, rows.Scan(&name, &read, &write))
		require.True(t, read, "table %s: the application role cannot read it (default privileges of the baseline migration)", name)
		require.False(t, write, "table %s: the application role may write it; grant SELECT only", name)
		tables++
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, tables, 4, "accounts, jobs, ledger_entries, api_keys")

	// Everything the role may execute runs as the owner with a pinned search_path, but for the reads
	// listed in readOnly, which run as the role itself and so can write nothing; the helpers the
	// money functions call inside (ledger_job_unmatched, ledger_job_result_of) are no one's to call.
	// The statement runs as its caller: it reads the service's own transactions in
	// pg_stat_activity to say whether it is final. The invariant checker's snapshot and the audit's block checks read only.
	readOnly := map[string]bool{"ledger_statement": true, "ledger_snapshot_accounts": true, "ledger_snapshot_jobs": true,
		"ledger_audit_blocks": true}
	rows, err = pool.Query(ctx, `
		SELECT p.proname, p.prosecdef, coalesce(array_to_string(p.proconfig, ','), ''),
		       has_function_privilege($1, p.oid, 'EXECUTE'), has_function_privilege('public', p.oid, 'EXECUTE')
		FROM pg_proc p
		WHERE p.pronamespace = current_schema()::regnamespace`, appRole)
	require.NoError(t, err)
	executable := map[string]bool{}
	for rows.Next() {
		var name, config string
		var definer, byApp, byPublic bool
		require.NoError(t, rows.Scan(&name, &definer, &config, &byApp, &byPublic))
		if definer {
			require.False(t, byPublic, "function %s runs as the owner and PUBLIC may call it", name)
			require.Regexp(t, `(^|,)search_path=.*\bpg_temp$`, config, "function %s runs as the owner: pin its search_path, pg_temp last", name)
		}
		if byApp {
			executable[name] = true
			require.True(t, definer || readOnly[name], "function %s: the application role may call it, but it runs as the caller, who may write nothing", name)
		}
	}
	require.NoError(t, rows.Err())
	for _, name := range []string{"ledger_submit", "ledger_charge", "ledger_refund", "ledger_reclaim", "ledger_deliver",
		"ledger_record_attempt", "ledger_delete", "ledger_open_account", "ledger_post",
		"ledger_settle", "ledger_reject_orphan", "ledger_record_result", "ledger_mark_result_applied", "ledger_raise_alarm",
		"ledger_set_price", "ledger_create_api_key", "ledger_revoke_api_key", "ledger_console_open_session", "ledger_console_end_session",
		"ledger_webhook_create_endpoint", "ledger_webhook_disable_endpoint", "ledger_webhook_rotate_secret",
		"ledger_webhook_set_low_balance", "ledger_webhook_derive", "ledger_webhook_claim", "ledger_webhook_record_attempt",
		"ledger_webhook_replay", "ledger_statement", "ledger_revenue", "ledger_revenue_audit",
		"ledger_snapshot_accounts", "ledger_snapshot_jobs", "ledger_audit_blocks"} {
		require.True(t, executable[name], "the application role cannot call %s", name)
	}
	require.False(t, executable["ledger_refuse_rewrite"] || executable["jobs_refuse_rewrite"] || executable["api_keys_refuse_rewrite"] ||
		executable["console_sessions_refuse_rewrite"],
		"trigger functions are nobody's to call")
	require.False(t, executable["ledger_job_unmatched"] || executable["ledger_job_result_of"] || executable["ledger_max_balance"] ||
		executable["ledger_deliver_running"] || executable["ledger_recover"], "the money functions' helpers are nobody's to call")
	require.False(t, executable["ledger_revenue_classed"], "the revenue report's moves are read through the report and its audit only")
	require.False(t, executable["ledger_webhook_materialize"] || executable["ledger_webhook_job_events"] ||
		executable["ledger_webhook_materialize_topups"] || executable["ledger_topup_requests"] || executable["ledger_webhook_queue_to"],
		"events are written only by the derive pass and a replay, from committed rows, never called alone")
	t.Logf("the application role may call: %s", strings.Join(sortedKeys(executable), ", "))
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestAppRoleCannotWritePricesOrSettlements checks the append-only and price-list rules at the
// grants for the price list and the settlement: the application role is refused (42501) every
// direct write of the prices table — INSERT, UPDATE, DELETE, TRUNCATE — and every direct change of
// a job's price (kind, price version, unit, unit price, held units) or settlement (units used, the
// settled flag), a release row written by hand, and the settlement's inner steps, ledger_deliver_running and
// ledger_recover.
// The price list changes only through ledger_set_price, which the role may call.
func TestAppRoleCannotWritePricesOrSettlements(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	requireAppRole(t, s)
	kind := ledgertest.Metered(t, s, 3, 20)
	acct, job := settledAtFive(t, s, kind)

	q := func(v string) string { return "'" + v + "'" }
	for _, stmt := range []string{
		`INSERT INTO prices (kind, version, unit, unit_price, max_units) VALUES (` + q(kind) + `, 99, 'gpu_second', 1, 20)`,
		`INSERT INTO prices (kind, version, unit, unit_price, max_units) VALUES (` + q(ledgertest.OwnKind(t)) + `, 1, 'job', 1, 1)`,
		`UPDATE prices SET unit_price = 1 WHERE kind = ` + q(kind),
		`DELETE FROM prices WHERE kind = ` + q(kind),
		`TRUNCATE prices CASCADE`,
		`UPDATE jobs SET kind = ` + q(ledgertest.Fixed(t, s, 1)) + ` WHERE id = ` + q(job.String()),
		`UPDATE jobs SET price_version = price_version + 1 WHERE id = ` + q(job.String()),
		`UPDATE jobs SET unit = 'job' WHERE id = ` + q(job.String()),
		`UPDATE jobs SET unit_price = 1 WHERE id = ` + q(job.String()),
		`UPDATE jobs SET held_units = 1 WHERE id = ` + q(job.String()),
		`UPDATE jobs SET units_used = 20 WHERE id = ` + q(job.String()),
		`UPDATE jobs SET is_settled = false, units_used = NULL, settled_at = NULL WHERE id = ` + q(job.String()),
		`INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
			VALUES (` + q(acct) + `, ` + q(job.String()) + `, 'release', 60, 1000)`,
		`SELECT ledger_deliver_running(` + q(job.String()) + `, 1, 0, NULL)`,
		`SELECT ledger_recover(` + q(job.String()) + `, 0, NULL, ARRAY['recovered'])`,
		// The credit blocks move only with the rows that move them.
		`UPDATE credit_blocks SET remaining = remaining + 100 WHERE account_id = ` + q(acct),
		`INSERT INTO ledger_block_moves (account_id, block_id, amount) SELECT account_id, id, 100 FROM credit_blocks WHERE account_id = ` + q(acct),
		`SELECT ledger_block_draw(` + q(acct) + `, NULL, 10, true)`,
		`SELECT ledger_block_return_rest(` + q(acct) + `, NULL, 10, false, true)`,
		`SELECT ledger_block_move(` + q(acct) + `, NULL, NULL, -10)`,
	} {
		// Each statement runs in a transaction that is rolled back whatever happens, so that a
		// regression of the grants cannot damage the shared test database.
		pgErr := refusal(ctx, t, s.Pool(), stmt)
		require.Equal(t, "42501", pgErr.Code, "%s: %s", stmt, pgErr.Message)
	}

	// The door the role has: the function, directly.
	own := ledgertest.OwnKind(t)
	var outcome string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT outcome FROM ledger_set_price($1, 'gpu_second', 7, 30, 'set as the app role')`, own).Scan(&outcome))
	require.Equal(t, "applied", outcome)
	p, err := s.CurrentPrice(ctx, own)
	require.NoError(t, err)
	require.Equal(t, int64(7), p.UnitPrice)

	history, err := s.PriceHistory(ctx, kind)
	require.NoError(t, err)
	require.Equal(t, int64(3), history[len(history)-1].UnitPrice)
	requireSettledAtFive(t, s, acct, job, 60, 45)
}

// TestDatabaseRefusesPriceAndSettlementRewrites checks the append-only and price-list rules at the
// database itself, for the table's owner too (the application role is refused earlier, by its
// grants): a price's row is never updated or deleted and the table never truncated
// (prices_append_only, prices_no_truncate: a job's price version must keep meaning what it meant);
// and a job's price — kind, price version, unit, unit price, held units, cost — is fixed at
// submission, and its settlement once made: the units used never change and the settled flag never
// goes back, nor does the time it was delivered, which dates the revenue of a delivery that wrote
// no row (jobs_fixed_fields).
func TestDatabaseRefusesPriceAndSettlementRewrites(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	owner := ledgertest.OwnerPool(t)
	kind := ledgertest.OwnKind(t)
	_, _, err := s.SetPrice(ctx, ledgerdb.Price{Kind: kind, Unit: ledgerdb.UnitGPUSecond, UnitPrice: 3, MaxUnits: 20})
	require.NoError(t, err)
	_, _, err = s.SetPrice(ctx, ledgerdb.Price{Kind: kind, Unit: ledgerdb.UnitGPUSecond, UnitPrice: 4, MaxUnits: 20})
	require.NoError(t, err)
	acct, job := settledAtFive(t, s, kind)

	q := func(v string) string { return "'" + v + "'" }
	for _, stmt := range []string{
		`UPDATE prices SET unit_price = 1 WHERE kind = ` + q(kind),
		`UPDATE prices SET memo = 'rewritten' WHERE kind = ` + q(kind),
		`DELETE FROM prices WHERE kind = ` + q(kind) + ` AND version = 2`,
		`TRUNCATE prices CASCADE`,
		`UPDATE jobs SET kind = ` + q(ledgertest.Fixed(t, s, 80)) + `, price_version = 1, unit = 'job', unit_price = 80, held_units = 1 WHERE id = ` + q(job.String()),
		`UPDATE jobs SET price_version = 1, unit_price = 3, cost = 60 WHERE id = ` + q(job.String()),
		`UPDATE jobs SET unit_price = 1, cost = 20 WHERE id = ` + q(job.String()),
		`UPDATE jobs SET held_units = 10, cost = 40 WHERE id = ` + q(job.String()),
		`UPDATE jobs SET unit = 'job' WHERE id = ` + q(job.String()),
		`UPDATE jobs SET units_used = 20 WHERE id = ` + q(job.String()),
		`UPDATE jobs SET units_used = 0 WHERE id = ` + q(job.String()),
		`UPDATE jobs SET is_settled = false, units_used = NULL, settled_at = NULL WHERE id = ` + q(job.String()),
		`UPDATE jobs SET delivered_at = delivered_at + interval '1 month' WHERE id = ` + q(job.String()),
		`UPDATE jobs SET delivered_at = NULL WHERE id = ` + q(job.String()),
	} {
		pgErr := refusal(ctx, t, owner, stmt)
		require.Contains(t, []string{"JB001", "JB002"}, pgErr.Code, "%s: %s", stmt, pgErr.Message)
		require.True(t, ledgerdb.Permanent(pgErr), stmt)
	}
	history, err := s.PriceHistory(ctx, kind)
	require.NoError(t, err)
	require.Len(t, history, 2)
	read, err := s.Job(ctx, job)
	require.NoError(t, err)
	require.Equal(t, 2, read.PriceVersion)
	requireSettledAtFive(t, s, acct, job, 80, 60)
}

// TestAppRoleCannotWriteWebhookTables checks the outbox at the grants (the append-only and
// one-transaction-per-transition rules for what is told): the application role is refused (42501)
// every direct write of the webhook tables — forging, changing or removing an event, queueing or
// marking a delivery, rewriting the delivery log, adding or redirecting an endpoint, setting a
// threshold, moving the derive cursor — and calling the event writer alone; events are derived only
// from committed money rows, and the rest changes only through the ledger_webhook_* functions,
// which the role may call.
func TestAppRoleCannotWriteWebhookTables(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	requireAppRole(t, s)
	acct, job := charged(t, s, 100, 40)

	q := func(v string) string { return "'" + v + "'" }
	for _, stmt := range []string{
		`INSERT INTO webhook_events (id, account_id, job_id, type, payload) VALUES ('msg_00000000000000000000000000000000', ` + q(acct) + `, ` + q(job.String()) + `, 'job.refunded', '{}')`,
		`UPDATE webhook_events SET payload = '{"charged": 0}' WHERE account_id = ` + q(acct),
		`DELETE FROM webhook_events WHERE account_id = ` + q(acct),
		`TRUNCATE webhook_events CASCADE`,
		`INSERT INTO webhook_endpoints (id, account_id, url, secret) VALUES ('we_0000000000000000', ` + q(acct) + `, 'https://evil.example/', 'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=')`,
		`UPDATE webhook_endpoints SET url = 'https://evil.example/' WHERE account_id = ` + q(acct),
		`UPDATE webhook_deliveries SET status = 'delivered', finished_at = now()`,
		`DELETE FROM webhook_deliveries`,
		`INSERT INTO webhook_attempts (endpoint_id, event_seq, attempt, duration_ms, outcome) SELECT 'we_0000000000000000', 1, 1, 0, 'delivered'`,
		`DELETE FROM webhook_attempts`,
		`INSERT INTO webhook_low_balance (account_id, threshold) VALUES (` + q(acct) + `, 1)`,
		`UPDATE webhook_derive_cursor SET horizon = '0'`,
		`SELECT ledger_webhook_materialize(ARRAY[` + q(job.String()) + `], '{}', NULL, NULL)`,
	} {
		pgErr := refusal(ctx, t, s.Pool(), stmt)
		require.Equal(t, "42501", pgErr.Code, "%s: %s", stmt, pgErr.Message)
	}

	// No event was forged (the account has no endpoint, so none is derived); the doors the role
	// has work.
	var n int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE job_id = $1`, job.String()).Scan(&n))
	require.Zero(t, n)
	var outcome string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT ledger_webhook_set_low_balance($1, 10)`, acct).Scan(&outcome))
	require.Equal(t, "applied", outcome)
}

// TestDatabaseRefusesEventRewrites checks, for the table's owner too, that an event and a delivery
// log entry are never changed or removed once written (webhook_events_append_only,
// webhook_attempts_append_only): what was sent stays what it was.
func TestDatabaseRefusesEventRewrites(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	owner := ledgertest.OwnerPool(t)
	acct, job := submitted(t, s, 100, 40)
	// An endpoint, so that the charge's event is derived.
	var outcome string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT outcome FROM ledger_webhook_create_endpoint($1, $2, 'https://hooks.example.com/', $3, '')`,
		fmt.Sprintf("we_%016x", time.Now().UnixNano()), acct,
		"whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").Scan(&outcome))
	require.Equal(t, "applied", outcome)
	_, err := s.Charge(ctx, job)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT derived FROM ledger_webhook_derive(1000)`).Scan(&n))
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE job_id = $1`, job.String()).Scan(&n))
		return n == 1
	}, 2*time.Minute, 10*time.Millisecond, "the charge's event is derived once every older transaction has ended")
	for _, stmt := range []string{
		`UPDATE webhook_events SET type = 'job.refunded' WHERE job_id = '` + job.String() + `'`,
		`DELETE FROM webhook_events WHERE account_id = '` + acct + `'`,
		`TRUNCATE webhook_events CASCADE`,
		`TRUNCATE webhook_attempts`,
	} {
		pgErr := refusal(ctx, t, owner, stmt)
		require.Equal(t, "JB001", pgErr.Code, "%s: %s", stmt, pgErr.Message)
	}
}

// refusal runs stmt in a transaction that is rolled back whatever happens, so that a regression of
// the grants or the refusing triggers cannot damage the shared test database, and answers the
// database's refusal of it; a statement that is not refused fails the test.
//
// A TRUNCATE … CASCADE locks every table it reaches, and the other packages' tests write those
// tables at the same time: a deadlock (40P01) aborts the statement before the privilege check or
// the refusing trigger has judged it, so it says nothing, and the statement is run again — for as
// long as refusalPatience allows, since a loaded machine's other tests can deadlock it many times
// in a row (five tries were not enough beside a stress run).
func refusal(ctx context.Context, t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, stmt string) *pgconn.PgError {
	t.Helper()
	deadline := time.Now().Add(refusalPatience)
	for {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		// A TRUNCATE takes its tables' exclusive locks one by one before its trigger refuses it,
		// so it can deadlock with another package's reader of the same tables; PostgreSQL then
		// aborts whichever waited first, which may be the other test (an audit failed CI that
		// way). Giving up a lock well before the deadlock check makes this statement the one that
		// yields, and it runs again.
		_, err = tx.Exec(ctx, `SET LOCAL lock_timeout = '100ms'`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, stmt)
		require.NoError(t, tx.Rollback(ctx))
		require.Error(t, err, stmt)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, stmt)
		yielded := pgErr.Code == "40P01" || pgErr.Code == "55P03" // deadlock_detected, lock_not_available
		if !yielded || time.Now().After(deadline) {
			return pgErr
		}
	}
}

// refusalPatience is how long refusal runs a statement again while it deadlocks or waits for a lock.
const refusalPatience = 2 * time.Minute
