package ledgerdb_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
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
