package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"

	"github.com/jobbill/jobbill/ledgerdb"
)

// MaxURLLength is the longest receiver URL, in bytes.
const MaxURLLength = 2048

// URLPolicy says which receiver URLs are allowed. A customer chooses the URL and jobbill's worker
// POSTs to it from inside jobbill's network, so by default the URL must be https and reach a public
// address only: never loopback, private, link-local (the cloud metadata service), shared,
// multicast or unspecified ones (SSRF). The check runs twice: on the URL when the endpoint is made,
// and on every address the worker actually connects to, so that a name that resolves to an
// internal address later (DNS rebinding) is refused too.
type URLPolicy struct {
	// AllowPrivate lets URLs use plain http and reach internal addresses: for development and
	// tests (webhooks.allow_private_urls).
	AllowPrivate bool
}

// ErrAddressRefused is an internal address refused by the policy.
var ErrAddressRefused = errors.New("the address is internal (loopback, private, link-local or reserved); webhooks go to public addresses only")

// Check refuses a URL the policy does not allow, as bad input naming the field "url".
func (p URLPolicy) Check(raw string) error {
	bad := func(reason string) error { return &ledgerdb.InvalidInputError{Field: "url", Reason: reason} }
	if err := ledgerdb.ValidateText("url", raw, MaxURLLength); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return bad("must not be empty")
	case err != nil || u.Host == "" || u.Opaque != "":
		return bad(fmt.Sprintf("%q is not an absolute URL", clip(raw)))
	case u.User != nil:
		return bad("must not carry a user or password; authenticate the request by its signature")
	case u.Fragment != "":
		return bad("must not have a #fragment")
	case u.Scheme != "https" && !(p.AllowPrivate && u.Scheme == "http"):
		return bad(fmt.Sprintf("is %s; webhooks are sent over https only", u.Scheme))
	}
	host := strings.ToLower(u.Hostname())
	if p.AllowPrivate {
		return nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || strings.HasSuffix(host, ".internal") || strings.HasSuffix(host, ".local") {
		return bad(fmt.Sprintf("host %q: %v", host, ErrAddressRefused))
	}
	if ip, err := netip.ParseAddr(host); err == nil && internal(ip) {
		return bad(fmt.Sprintf("host %q: %v", host, ErrAddressRefused))
	}
	return nil
}

// internal reports whether an address is one a customer's URL must not reach.
func internal(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range reserved {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// reserved are further ranges that are not the public internet: "this network", shared address
// space (carrier-grade NAT), IETF protocol assignments, the documentation and benchmarking ranges,
// the old 6to4 relay, class E and the limited broadcast.
var reserved = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "192.88.99.0/24", "240.0.0.0/4", "255.255.255.255/32",
		"64:ff9b:1::/48", "100::/64", "2001:db8::/32", "2002::/16"} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// dialControl refuses, at connect time, an address the policy does not allow: what a name
// resolved to is checked, not only what the URL said.
func (p URLPolicy) dialControl(_, address string, _ syscall.RawConn) error {
	if p.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", address, err)
	}
	if internal(ap.Addr()) {
		return fmt.Errorf("connecting to %s: %w", ap.Addr(), ErrAddressRefused)
	}
	return nil
}

// dialer is a net.Dialer bound by the policy.
func (p URLPolicy) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Control: p.dialControl}
	return d.DialContext
}
