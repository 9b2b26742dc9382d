package deliveries

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Policy says where webhooks may be sent. In production (the zero Policy) only https URLs
// whose host is, and resolves to, a public address: never loopback, private (RFC 1918,
// fc00::/7), link-local (169.254/16, where cloud metadata services answer, and fe80::/10),
// shared (100.64/10), unspecified, multicast or reserved. AllowLoopback (tekrar dev) also
// allows http, and loopback addresses, so that a receiver on the developer's machine works.
type Policy struct {
	AllowLoopback bool
}

// ErrForbiddenDestination is a URL or an address webhooks are never sent to.
var ErrForbiddenDestination = errors.New("forbidden destination")

// blocked are ranges beside what netip's predicates name (loopback, private, link-local,
// multicast, unspecified).
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier NAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: would reach any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds an IPv4 address
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
	netip.MustParsePrefix("::ffff:0:0/96"),   // IPv4-mapped (Unmap checks the IPv4 address)
	netip.MustParsePrefix("::/128"),          // unspecified
	netip.MustParsePrefix("2001::/32"),       // Teredo: embeds an IPv4 address
	netip.MustParsePrefix("2001:10::/28"),    // ORCHID
	netip.MustParsePrefix("2001:20::/28"),    // ORCHIDv2
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
}

// CheckAddr refuses an address webhooks may not be sent to.
func (p Policy) CheckAddr(ip netip.Addr) error {
	ip = ip.Unmap()
	if ip.IsLoopback() {
		if p.AllowLoopback {
			return nil
		}
		return fmt.Errorf("%w: %s is a loopback address", ErrForbiddenDestination, ip)
	}
	if ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified() || !ip.IsValid() {
		return fmt.Errorf("%w: %s is a private, link-local or unspecified address", ErrForbiddenDestination, ip)
	}
	for _, b := range blocked {
		if b.Contains(ip) {
			return fmt.Errorf("%w: %s is in the reserved range %s", ErrForbiddenDestination, ip, b)
		}
	}
	return nil
}

// CheckURL validates an endpoint URL as a client sends it: absolute, https (http too with
// AllowLoopback), no credentials or fragment, and a host that is not a forbidden address.
// A host name is resolved now as well, to refuse early what would be refused at every
// delivery; the check that counts is the one at dial time (see NewHTTPClient), because a
// name can resolve elsewhere later.
func (p Policy) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return errors.New("must be an absolute URL, such as https://example.com/webhooks")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowLoopback:
	default:
		return fmt.Errorf("%w: must use https", ErrForbiddenDestination)
	}
	if u.User != nil || u.Fragment != "" {
		return errors.New("may not carry credentials or a fragment")
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.CheckAddr(ip)
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") || strings.HasSuffix(strings.ToLower(strings.TrimSuffix(host, ".")), ".localhost") {
		return p.CheckAddr(netip.IPv6Loopback())
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
	if err != nil {
		return nil // not resolvable now: the dial-time check decides at each delivery
	}
	for _, a := range addrs {
		if err := p.CheckAddr(a); err != nil {
			return fmt.Errorf("%s resolves to a forbidden address: %w", host, err)
		}
	}
	return nil
}

// NewHTTPClient returns the client deliveries are made with: a whole attempt bounded by
// timeout, redirects not followed (a 3xx is a failed attempt: a redirect could point
// anywhere), no proxy from the environment, and every connection's address checked by the
// policy after name resolution, in the dialer, so that DNS rebinding cannot reach an
// address the URL check refused.
func NewHTTPClient(p Policy, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{
		Timeout: timeout,
		Control: func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrForbiddenDestination, address)
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrForbiddenDestination, address)
			}
			return p.CheckAddr(ip)
		},
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
