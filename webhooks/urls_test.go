package webhooks_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// TestURLPolicyRefusesInternalAddresses checks the SSRF rule: by default a receiver URL must be
// https to a public host; loopback, private, link-local (the cloud metadata service), shared and
// reserved addresses, localhost names, plain http, credentials in the URL and what is not a URL at
// all are refused as bad input naming the field. Allowing private URLs (development, tests) lets
// loopback and http through, and still refuses what is not a URL.
func TestURLPolicyRefusesInternalAddresses(t *testing.T) {
	strict := webhooks.URLPolicy{}
	for _, ok := range []string{"https://hooks.example.com/jobbill", "https://93.184.215.14:8443/x?y=1", "https://[2606:4700::1111]/"} {
		require.NoError(t, strict.Check(ok), ok)
	}
	for _, bad := range []string{
		"", "hooks.example.com", "ftp://example.com/", "http://hooks.example.com/", "https://user:pw@example.com/",
		"https://localhost/", "https://api.localhost/", "https://db.internal/", "https://printer.local/",
		"https://127.0.0.1/", "https://127.1.2.3:9090/metrics", "https://10.0.3.7/", "https://172.16.0.1/", "https://192.168.1.1/",
		"https://169.254.169.254/latest/meta-data/", "https://100.64.0.1/", "https://0.0.0.0/", "https://[::1]/",
		"https://[fd00::1]/", "https://[fe80::1]/", "https://[::ffff:127.0.0.1]/", "https://224.0.0.1/", "https://example.com/#x",
		"https://example.com/\u202e",
	} {
		err := strict.Check(bad)
		var invalid *ledgerdb.InvalidInputError
		require.ErrorAs(t, err, &invalid, bad)
		require.Equal(t, "url", invalid.Field, bad)
	}
	open := webhooks.URLPolicy{AllowPrivate: true}
	require.NoError(t, open.Check("http://127.0.0.1:8080/hooks"))
	require.NoError(t, open.Check("https://localhost/"))
	require.Error(t, open.Check("ftp://127.0.0.1/"))
	require.Error(t, open.Check("not a url"))
}

// TestURLPolicyNormalisesTheHost checks the SSRF rule against hosts written so that the URL's text
// misses what the worker's dialer would reach: a trailing dot (a fully qualified name: localhost.
// is localhost, metadata.google.internal. the cloud metadata service), letters in another case,
// international forms that map to an internal name or address (a circled or fullwidth letter or
// digit, an ideographic full stop), IPv4 in notations other than four decimal numbers (one number,
// hexadecimal, octal, fewer parts — which resolvers read as 127.0.0.1), a name of one label (only
// a resolver's search domains make it resolve, inside), and IPv6 forms that embed an internal IPv4
// address (NAT64, IPv4-compatible), with or without a zone. Each is refused when the endpoint is made, as bad input naming
// the field — before, such a URL passed, and its deliveries were refused at connect time and retried
// for 72 hours. Public hosts in the same forms still pass.
func TestURLPolicyNormalisesTheHost(t *testing.T) {
	strict := webhooks.URLPolicy{}
	for _, bad := range []string{
		"https://localhost./x", "https://localhost../x", "https://LOCALHOST/x", "https://LocalHost./x",
		"https://metadata.google.internal./computeMetadata/v1/", "https://Metadata.Google.Internal/",
		"https://printer.LOCAL./", "https://api.localhost./", "https://127.0.0.1./", "https://169.254.169.254./",
		"https://ⓛocalhost/", "https://ｌｏｃａｌｈｏｓｔ/",
		"https://１２７.０.０.１/", "https://127。0。0。1/", "https://169。254。169。254/",
		"https://2130706433/", "https://0x7f000001/", "https://0177.0.0.1/", "https://127.1/", "https://0/",
		"https://0xa9.0xfe.0xa9.0xfe/", "https://2852039166/", "https://10.1/",
		"https://metadata/computeMetadata/v1/", "https://router./",
		"https://[64:ff9b::a9fe:a9fe]/", "https://[64:ff9b::7f00:1]/", "https://[::7f00:1]/", "https://[::a00:307]/",
		"https://./", "https://[::ffff:169.254.169.254]/", "https://[64:ff9b::7f00:1%25eth0]/", "https://[::7f00:1%25eth0]/",
		"https://[2001:db8::1%25eth0]/",
	} {
		err := strict.Check(bad)
		var invalid *ledgerdb.InvalidInputError
		require.ErrorAs(t, err, &invalid, "%q passed the check", bad)
		require.Equal(t, "url", invalid.Field, bad)
	}
	for _, ok := range []string{
		"https://Hooks.Example.COM/jobbill", "https://hooks.example.com./jobbill", "https://bücher.example/hooks",
		"https://xn--bcher-kva.example/hooks", "https://hooks_1.example.com/", "https://[64:ff9b::5db8:d70e]/",
		"https://93.184.215.14./x",
	} {
		require.NoError(t, strict.Check(ok), ok)
	}
}

// TestWorkerRefusesInternalAddressAtSend checks the SSRF rule at send time: an endpoint whose URL
// reaches an internal address (made while private URLs were allowed, or a name that now resolves
// inside) is never contacted by a worker that does not allow them; the attempt is logged as
// failed to send, with nothing reaching the address.
func TestWorkerRefusesInternalAddressAtSend(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	acct := account(t, s, ws, 100)
	var hits atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(internal.Close)
	ep, err := ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: internal.URL}, webhooks.URLPolicy{AllowPrivate: true})
	require.NoError(t, err)
	chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10))
	caughtUp(t, ws)

	opts := testOptions(ws, acct)
	opts.AllowPrivateURLs = false
	n, err := webhooks.NewWorker(opts).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, hits.Load(), "the internal address was never contacted")
	log, err := ws.Attempts(ctx, acct, ep.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 1)
	require.Equal(t, "retry", log[0].Outcome)
	require.Nil(t, log[0].HTTPStatus)
	require.Contains(t, log[0].Error, "https")

	// Refused at creation without the allowance, nothing written.
	_, err = ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: "https://169.254.169.254/"}, webhooks.URLPolicy{})
	var invalid *ledgerdb.InvalidInputError
	require.ErrorAs(t, err, &invalid)
	eps, err := ws.Endpoints(ctx, acct)
	require.NoError(t, err)
	require.Len(t, eps, 1)
}

// TestWorkerRefusesANameThatResolvesInside checks the SSRF rule where the URL alone cannot tell:
// a host name that resolves to an internal address (this machine's own name, or a name re-pointed
// after the endpoint was made) is refused when the worker connects, before anything is sent, and
// the attempt is logged with the reason. A machine's name of one label is refused already when an
// endpoint is made (only search domains resolve it), so the endpoint is then one made while private
// URLs were allowed, which the worker's dialer must refuse all the same.
func TestWorkerRefusesANameThatResolvesInside(t *testing.T) {
	ctx := context.Background()
	host, err := os.Hostname()
	require.NoError(t, err)
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 || !(addrs[0].IsLoopback() || addrs[0].IsPrivate()) {
		t.Skipf("this machine's name %q does not resolve to an internal address (%v, %v)", host, addrs, err)
	}
	s, ws := stores(t)
	acct := account(t, s, ws, 100)
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	url := "https://" + host + ":" + port + "/hooks"
	made := webhooks.URLPolicy{}
	if !strings.Contains(host, ".") {
		require.Error(t, made.Check(url), "a name of one label is refused when an endpoint is made")
		made.AllowPrivate = true
	}
	ep, err := ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: url}, made)
	require.NoError(t, err, "the URL itself names no internal address")
	chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10))
	caughtUp(t, ws)

	opts := testOptions(ws, acct)
	opts.AllowPrivateURLs = false
	_, err = webhooks.NewWorker(opts).RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, hits.Load(), "nothing reached the internal address")
	log, err := ws.Attempts(ctx, acct, ep.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 1)
	require.Contains(t, log[0].Error, "internal")
}
