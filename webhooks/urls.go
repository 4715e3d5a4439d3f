package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/jobbill/jobbill/ledgerdb"
)

// MaxURLLength is the longest receiver URL, in bytes.
const MaxURLLength = 2048

// URLPolicy says which receiver URLs are allowed. A customer chooses the URL and jobbill's worker
// POSTs to it from inside jobbill's network, so by default the URL must be https and reach a public
// address only: never loopback, private, link-local (the cloud metadata service), shared,
// multicast or unspecified ones (SSRF). The check runs twice: on the URL when the endpoint is made,
// and on every address the worker actually connects to, so that a name that resolves to an
// internal address later (DNS rebinding) is refused too. The first judges the host as the
// worker's dialer will reach it ([normalHost]), so that no spelling of an internal host — a
// trailing dot, another case, an international form, IPv4 in another notation — passes it only to
// be refused at every delivery for the whole retry window.
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
	if p.AllowPrivate {
		return nil
	}
	host, ip, err := normalHost(u.Hostname())
	switch {
	case err != nil:
		return bad(fmt.Sprintf("host %q %v", clip(u.Hostname()), err))
	case ip.IsValid():
		if internal(ip) {
			return bad(fmt.Sprintf("host %q: %v", host, ErrAddressRefused))
		}
	case !strings.Contains(host, "."):
		// A name of one label resolves only through a resolver's search domains: inside.
		return bad(fmt.Sprintf("host %q: %v", host, ErrAddressRefused))
	default:
		for _, suffix := range internalSuffixes {
			if strings.HasSuffix(host, suffix) {
				return bad(fmt.Sprintf("host %q: %v", host, ErrAddressRefused))
			}
		}
	}
	return nil
}

// internalSuffixes end the names that only a network's own resolvers answer, never the public
// DNS: localhost's, cloud providers' (metadata.google.internal), multicast DNS's and home networks'.
var internalSuffixes = []string{".localhost", ".internal", ".local", ".home.arpa"}

// normalHost is a URL's host as the worker's dialer reaches it, so that the rules judge what it
// connects to rather than how the URL spells it: an address literal is answered as the address; a
// name in another script or width is mapped to ASCII as the HTTP client maps it (IDNA, UTS #46:
// "ⓛocalhost" is localhost, "１２７。０。０。１" 127.0.0.1), in lower case, without the trailing dots
// of a fully qualified name ("localhost." is localhost) — and is then an address if it reads as
// one. A name whose last label is a number is IPv4 in another notation ("2130706433", "0x7f000001",
// "0177.0.0.1", "127.1"), which resolvers read as an address but this check would not: it is
// refused, as is a host that IDNA refuses or that is empty once its dots are gone.
func normalHost(raw string) (host string, ip netip.Addr, err error) {
	if ip, err := netip.ParseAddr(raw); err == nil {
		return raw, ip, nil
	}
	host = raw
	if !isASCII(host) {
		if host, err = idna.Lookup.ToASCII(host); err != nil {
			return "", netip.Addr{}, fmt.Errorf("is not a host name: %v", err)
		}
	}
	host = strings.TrimRight(strings.ToLower(host), ".")
	if host == "" {
		return "", netip.Addr{}, errors.New("names no host")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return host, ip, nil
	}
	if labels := strings.Split(host, "."); numericLabel.MatchString(labels[len(labels)-1]) {
		return "", netip.Addr{}, errors.New("is IPv4 in a notation other than four decimal numbers; write the address as a.b.c.d")
	}
	return host, netip.Addr{}, nil
}

// numericLabel is a label that makes a host an IPv4 address to resolvers and browsers (the URL
// standard's "ends in a number"): decimal, octal or hexadecimal digits.
var numericLabel = regexp.MustCompile(`^([0-9]+|0[xX][0-9A-Fa-f]*)$`)

// isASCII reports whether s is ASCII only: the HTTP client maps only other hosts through IDNA.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// internal reports whether an address is one a customer's URL must not reach.
func internal(ip netip.Addr) bool {
	// A zone names the interface, not the address; and no prefix contains a zoned address.
	ip = ip.Unmap().WithZone("")
	if nat64.Contains(ip) {
		// A NAT64 gateway on the worker's network turns 64:ff9b::a.b.c.d into a.b.c.d.
		b := ip.As16()
		return internal(netip.AddrFrom4([4]byte(b[12:])))
	}
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

// nat64 is the well-known NAT64 prefix: its addresses carry an IPv4 address in their last 32 bits,
// which is what is reached through the gateway.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// reserved are further ranges that are not the public internet: "this network", shared address
// space (carrier-grade NAT), IETF protocol assignments, the documentation and benchmarking ranges,
// the old 6to4 relay, class E and the limited broadcast; in IPv6 the deprecated IPv4-compatible
// addresses (::a.b.c.d), local-use NAT64, the discard prefix, documentation and 6to4.
var reserved = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "192.88.99.0/24", "240.0.0.0/4", "255.255.255.255/32",
		"::/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "2002::/16"} {
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
