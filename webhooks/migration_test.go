package webhooks_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// inSchema is the database URL with schema as its search_path.
func inSchema(t *testing.T, raw, schema string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestMigrationCarriesTheOldOutboxAcross checks the upgrade from events written in the money
// transaction to events derived from the rows, on a deployment's data in flight: a ledger of the
// old schema holds a running job's charge, the event the old outbox wrote for it and that event's
// delivery, pending after a failed attempt. After the migration, the same workers send the pending
// delivery under its old webhook-id; the job's settle, the first transition under the new code,
// has its event derived after it; the charge's event is not derived a second time; and the
// receiver gets the job's two events once each, in order.
func TestMigrationCarriesTheOldOutboxAcross(t *testing.T) {
	ctx := context.Background()
	owner := ledgertest.OwnerPool(t)
	schema := fmt.Sprintf("upgrade_%d", time.Now().UnixNano())
	_, err := owner.Exec(ctx, `CREATE SCHEMA `+schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = owner.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`) })
	migrateURL := inSchema(t, ledgertest.MigrateDatabaseURL(), schema)
	require.NoError(t, ledgerdb.MigrateSchemaTo(ctx, migrateURL, 9))

	// The old outbox's data, as its money functions wrote it.
	rcv := newReceiver(t)
	secret := webhooks.NewSecret()
	rcv.secret.Store(secret)
	const legacyID = "msg_0123456789abcdef0123456789abcdef"
	old, err := pgxpool.New(ctx, migrateURL)
	require.NoError(t, err)
	defer old.Close()
	_, err = old.Exec(ctx, `
		INSERT INTO accounts (id, balance) VALUES ('acme', 960);
		INSERT INTO jobs (id, account_id, cost, state, is_charged, request_fingerprint, charged_at)
		VALUES ('acme/render-1', 'acme', 40, 'running', true, '\x00', now());
		INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key) VALUES ('acme', 'grant', 1000, 1000, 'top-up');
		INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after) VALUES ('acme', 'acme/render-1', 'charge', -40, 960);
		INSERT INTO webhook_endpoints (id, account_id, url, secret) VALUES ('we_0000000000000001', 'acme', '`+rcv.srv.URL+`/hooks', '`+secret+`');
		INSERT INTO webhook_events (id, account_id, job_id, type, payload)
		VALUES ('`+legacyID+`', 'acme', 'acme/render-1', 'job.charged', '{"job_id": "render-1", "state": "running"}');
		INSERT INTO webhook_deliveries (endpoint_id, event_seq, job_id, attempts, next_attempt_at)
		SELECT 'we_0000000000000001', seq, job_id, 1, now() FROM webhook_events;`)
	require.NoError(t, err)

	require.NoError(t, ledgerdb.Migrate(ctx, migrateURL))
	cfg, err := ledgerdb.PoolConfig(inSchema(t, ledgertest.DatabaseURL(), schema))
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	s := ledgerdb.New(pool)
	defer s.Close()
	ws := webhooks.NewStore(s.Pool())

	job := ledgerdb.JobKey{AccountID: "acme", JobID: "render-1"}
	applied(t, ledgerdb.Applied)(s.Settle(ctx, job, 1, nil, "out://1"))
	runWorkers(t, testOptions(ws, "acme"), 2)
	waitDelivered(t, s, "we_0000000000000001")

	evs := events(t, ws, "acme")
	require.Equal(t, []string{"job.charged", "job.delivered"}, types(evs), "the old event kept, the new one derived, none twice")
	require.Equal(t, legacyID, evs[0].ID)
	got := rcv.received()
	require.Len(t, got, 2)
	require.Equal(t, legacyID, got[0].id, "the pending delivery is sent under its old webhook-id")
	require.Equal(t, "job.delivered", got[1].msg.Type)
}
