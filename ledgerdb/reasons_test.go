package ledgerdb_test

import (
	"context"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestScrubTextMasksCredentials checks the shapes of credential ScrubText masks (trust: what the
// ledger keeps and operators read of a GPU service's words holds no password), and that words
// without one — the reasons jobbill writes itself — pass unchanged.
func TestScrubTextMasksCredentials(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"connect to postgres://svc:hunter2@10.0.3.7:5432/gpu failed; host gpu-7.internal",
			"connect to postgres://svc:***@10.0.3.7:5432/gpu failed; host gpu-7.internal"},
		{"GET https://ghp_abcdef0123456789@github.com/x: 401", "GET https://***@github.com/x: 401"},
		{"dial redis://:s3cr3t@cache:6379", "dial redis://:***@cache:6379"},
		{"amqp://u:p@ss@w0rd@mq/vhost down", "amqp://u:***@mq/vhost down"},
		{"login failed: password=hunter2 user=svc", "login failed: password=*** user=svc"},
		{"DB_PASSWORD: 'hunter2' refused", "DB_PASSWORD: '***' refused"},
		{`{"api_key":"sk-live-123","region":"eu"}`, `{"api_key":"***","region":"eu"}`},
		{"https://gpu/run?access_token=abc123&job=7", "https://gpu/run?access_token=***&job=7"},
		{"secret=xyz; token = t0k3n", "secret=***; token = ***"},
		{"Authorization: Bearer eyJhbGciOi.J9.sig rejected", "Authorization: Bearer *** rejected"},
		{"header authorization=Basic dXNlcjpwYXNz", "header authorization=Basic ***"},
		{"sent bearer abc.def.ghi", "sent bearer ***"},
		{"invalid token 3f9a0c1d2e3f4a5b6c7d8e9f0a1b2c3d", "invalid token ***"},
		{"timed out after 3 attempts", "timed out after 3 attempts"},
		{"failed for good after 1 attempt: input unreadable", "failed for good after 1 attempt: input unreadable"},
		{"stopped by an operator: terminated (wrong input file)", "stopped by an operator: terminated (wrong input file)"},
		{"line\none\x00two\xff", "line one two?"},
	} {
		require.Equal(t, c.want, ledgerdb.ScrubText(c.in), "scrubbing %q", c.in)
	}
	long := "failed: password=" + strings.Repeat("p", 300) + " " + strings.Repeat("x", 300)
	got := ledgerdb.ScrubText(long)
	require.True(t, strings.HasPrefix(got, "failed: password=*** xxx"), got)
	require.True(t, strings.HasSuffix(got, "…"), "a long text is clipped: %q", got)
}

// FuzzScrubText checks ScrubText on arbitrary text around a URL with a password (trust: what the
// ledger keeps and operators read never holds the password of a URL's userinfo): the output never
// contains the password, is never longer than the clip limit, is valid UTF-8 and holds no control
// character — whatever surrounds the URL, and whatever the password holds short of a space or a
// control character (such a password is not a URL's).
func FuzzScrubText(f *testing.F) {
	for _, seed := range []struct{ before, scheme, user, password, host, after string }{
		{"connect to ", "postgres", "svc", "hunter2", "10.0.3.7:5432/gpu", " failed; host gpu-7.internal"},
		{"", "https", "", "tok@en", "gpu.internal", ""},
		{"password=", "redis", "u", "p:w/d?#", "cache", "@x y"},
		{"\x00\xff", "s3", "AKIA", "wJalr/K7MDENG+bPxRfiCY", "bucket", strings.Repeat("é", 200)},
		{strings.Repeat("a", 230), "amqp", "u", "secretpass", "mq", ""},
	} {
		f.Add(seed.before, seed.scheme, seed.user, seed.password, seed.host, seed.after)
	}
	f.Fuzz(func(t *testing.T, before, scheme, user, password, host, after string) {
		url := func(password string) string {
			return before + scheme + "://" + user + ":" + password + "@" + host + after
		}
		out := ledgerdb.ScrubText(url(password))
		if len(out) > ledgerdb.ClipLength+len("…") {
			t.Fatalf("%d bytes, above the clip limit: %q", len(out), out)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("not valid UTF-8: %q", out)
		}
		for _, r := range out {
			if unicode.IsControl(r) {
				t.Fatalf("control character %U in %q", r, out)
			}
		}
		if !isURLPassword(scheme, user, password) {
			return
		}
		if masked := url("***"); strings.Contains(masked, password) || strings.Contains(ledgerdb.ScrubText(masked), password) {
			return // the password is also words outside the userinfo, which may stay
		}
		if strings.Contains(out, password) {
			t.Fatalf("the password %q is in %q", password, out)
		}
	})
}

// isURLPassword reports whether the parts make a URL whose userinfo holds password: a scheme (a
// letter, then letters, digits, + . -), a user without the characters that end one, and a
// password of printable characters without a space.
func isURLPassword(scheme, user, password string) bool {
	if scheme == "" || !isASCIILetter(rune(scheme[0])) || password == "" || !utf8.ValidString(password) || !utf8.ValidString(user) {
		return false
	}
	for _, r := range scheme {
		if !isASCIILetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("+.-", r) || r > unicode.MaxASCII {
			return false
		}
	}
	if strings.ContainsAny(user, " \t\n\f\r/?#@:") {
		return false
	}
	for _, r := range user + password {
		if unicode.IsControl(r) || strings.ContainsRune(" \t\n\f\r", r) {
			return false
		}
	}
	return true
}

func isASCIILetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// TestRefundKeepsCodeAndScrubbedDetail checks what a refund keeps (trust: the customer's words
// come from the vocabulary, the operator's hold no password; rule "bad input writes nothing"):
// the code in its constrained column and the detail scrubbed and clipped, never refused, since
// words from outside must not block a refund; a refund naming no code of the vocabulary is
// refused with nothing written — the job stays running, charged, with no refund row. The database
// itself refuses an unknown code, and a refunded job without one, whoever writes it.
func TestRefundKeepsCodeAndScrubbedDetail(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 100)
	job := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 40, "in").Job.Key()

	_, err := s.Refund(ctx, job, "lost in space", "failed", 1)
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)
	current, err := s.Job(ctx, job)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, current.State, "a refused refund writes nothing")
	ledgertest.RequireRows(t, s, job, 40, ledgerdb.KindCharge)

	detail := "failed for good after 1 attempt: connect to postgres://svc:hunter2@10.0.3.7:5432/gpu\x00 failed\xff " + strings.Repeat("x", 1000)
	refund, err := s.Refund(ctx, job, ledgerdb.ReasonGPUFailed, detail, 1)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, refund.Outcome)
	require.Equal(t, ledgerdb.ReasonGPUFailed, refund.Job.RefundReason)
	require.Equal(t, ledgerdb.ScrubText(detail), refund.Job.RefundDetail)
	require.True(t, strings.HasPrefix(refund.Job.RefundDetail,
		"failed for good after 1 attempt: connect to postgres://svc:***@10.0.3.7:5432/gpu  failed? xxx"), refund.Job.RefundDetail)
	require.LessOrEqual(t, len(refund.Job.RefundDetail), ledgerdb.ClipLength+len("…"))
	var code, kept string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT refund_reason_code, refund_reason FROM jobs WHERE id = $1`, job.String()).Scan(&code, &kept))
	require.Equal(t, "gpu_failed", code)
	require.NotContains(t, kept, "hunter2")
	ledgertest.RequireRows(t, s, job, 40, ledgerdb.KindCharge, ledgerdb.KindRefund)
	ledgertest.RequireBalance(t, s, acct, 100)

	again, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "another", 2)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Equal(t, ledgerdb.ReasonGPUFailed, again.Job.RefundReason, "the first refund's reason stands")

	owner := ledgertest.OwnerPool(t)
	for _, stmt := range []string{
		`UPDATE jobs SET refund_reason_code = 'lost' WHERE id = $1`,
		`UPDATE jobs SET refund_reason_code = NULL WHERE id = $1`,
	} {
		_, err := owner.Exec(ctx, stmt, job.String())
		require.ErrorContains(t, err, "jobs_refund_reason", stmt)
	}
}

// TestMigrationInfersRefundReasonCodes checks the migration that brought the codes (trust: a
// customer of a job refunded before it reads a code of the vocabulary too, never the old words):
// every refunded job — refunded, recovered, or deleted after its refund — gets the code its words
// name when jobbill wrote them, and 'unknown' otherwise; the words stay as the operator's detail,
// and a job never refunded gets none. It runs on a schema of its own, migrated to the version
// before, with rows as that version held them.
func TestMigrationInfersRefundReasonCodes(t *testing.T) {
	ctx := context.Background()
	conn := probeSchema(t)
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, 4))

	_, err := conn.Exec(ctx, `INSERT INTO accounts (id) VALUES ('acme')`)
	require.NoError(t, err)
	// A job's ID is its key, "<account>/<job>", since the version before.
	insert := func(id, state, before string, refunded, reclaimed bool, reason string) {
		t.Helper()
		_, err := conn.Exec(ctx, `INSERT INTO jobs (id, account_id, cost, state, state_before_delete, is_charged, is_refunded,
			is_reclaimed, request_fingerprint, refund_reason, reject_reason)
			VALUES ('acme/' || $1, 'acme', 40, $2, nullif($3, ''), $2 <> 'rejected', $4, $5, '\x00', nullif($6, ''),
			        CASE WHEN $2 = 'rejected' THEN 'insufficient_credits' END)`,
			id, state, before, refunded, reclaimed, reason)
		require.NoError(t, err, id)
	}
	insert("timed-out", "refunded", "", true, false, "timed out after 3 attempts")
	insert("failed", "refunded", "", true, false, "failed for good after 1 attempt: connect to postgres://svc:hunter2@db")
	insert("stopped", "recovered", "", true, true, "stopped by an operator: terminated (wrong input file)")
	insert("healed", "refunded", "", true, false, "the job's workflow failed (boom)")
	insert("other", "deleted", "refunded", true, false, "bench: work failed")
	insert("running", "running", "", false, false, "")
	insert("rejected", "rejected", "", false, false, "")
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, 5))

	rows, err := conn.Query(ctx, `SELECT substr(id, length('acme/') + 1), coalesce(refund_reason_code, ''), coalesce(refund_reason, '') FROM jobs`)
	require.NoError(t, err)
	got := map[string][2]string{}
	for rows.Next() {
		var id, code, detail string
		require.NoError(t, rows.Scan(&id, &code, &detail))
		got[id] = [2]string{code, detail}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string][2]string{
		"timed-out": {"timed_out", "timed out after 3 attempts"},
		"failed":    {"gpu_failed", "failed for good after 1 attempt: connect to postgres://svc:hunter2@db"},
		"stopped":   {"stopped_by_operator", "stopped by an operator: terminated (wrong input file)"},
		"healed":    {"interrupted", "the job's workflow failed (boom)"},
		"other":     {"unknown", "bench: work failed"},
		"running":   {"", ""},
		"rejected":  {"", ""},
	}, got)
	_, err = conn.Exec(ctx, `UPDATE jobs SET refund_reason_code = 'timed_out' WHERE id = 'acme/running'`)
	require.ErrorContains(t, err, "jobs_refund_reason_recorded", "only a refund records a code")
}
