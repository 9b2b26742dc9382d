package deliveries

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// shared (100.64/10), unspecified, multicast, an address that embeds or translates to an
// IPv4 address (IPv4-compatible, IPv4-mapped, NAT64, 6to4, Teredo), or any other range of
// IANA's special-purpose registries that is not globally reachable. AllowLoopback (tekrar
// dev) also allows http, and loopback addresses, so that a receiver on the developer's
// machine works.
type Policy struct {
	AllowLoopback bool
	// Lookup resolves a host name to its addresses; nil is the system's resolver. Tests set
	// it to make a name resolve where they need, as DNS rebinding would.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Logger records each refused address and why, for operators (a refusal's own text says
	// neither, since it reaches the client). nil: not recorded.
	Logger *slog.Logger
}

func (p Policy) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if p.Lookup != nil {
		return p.Lookup(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// ErrForbiddenDestination is a URL or an address webhooks are never sent to.
var ErrForbiddenDestination = errors.New("forbidden destination")

// refusal is an address the policy refused. Its text says only that the address is not
// allowed: it reaches the client (the problem that refuses an endpoint, each attempt's
// error, the reason an endpoint was disabled), and naming the address or its range would
// tell a client what an internal name resolves to. The address and why it was refused go
// to the policy's Logger.
type refusal struct {
	addr netip.Addr
	why  string
}

func (r *refusal) Error() string {
	return ErrForbiddenDestination.Error() + ": the address is not allowed"
}
func (r *refusal) Unwrap() error { return ErrForbiddenDestination }

// blocked are ranges beside what netip's predicates name (loopback, private, link-local,
// multicast, unspecified): IANA's IPv4 and IPv6 special-purpose address registries, each
// range of them that is not globally reachable, and the ranges that embed or translate to
// an IPv4 address (a relay or translator would reach whatever IPv4 address they carry).
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // this network
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier NAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast (deprecated)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated, all of it), with :: and ::1
	netip.MustParsePrefix("::ffff:0:0/96"),   // IPv4-mapped
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated (SIIT)
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: would reach any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("100:0:0:1::/64"),  // dummy prefix
	netip.MustParsePrefix("2001::/32"),       // Teredo: embeds an IPv4 address
	netip.MustParsePrefix("2001:2::/48"),     // benchmarking
	netip.MustParsePrefix("2001:10::/28"),    // ORCHID (deprecated)
	netip.MustParsePrefix("2001:20::/28"),    // ORCHIDv2: identifiers, not routed
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds an IPv4 address
	netip.MustParsePrefix("3fff::/20"),       // documentation
	netip.MustParsePrefix("5f00::/16"),       // SRv6 SIDs
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
}

// CheckAddr refuses an address webhooks may not be sent to. It takes the address as
// written: an IPv4-mapped one is refused (write the IPv4 address). The checks of a
// resolver's answer and of a connection's address, which carry IPv4 addresses in that
// form, unmap them first.
func (p Policy) CheckAddr(ip netip.Addr) error {
	if r := p.refuse(ip); r != nil {
		return r
	}
	return nil
}

func (p Policy) refuse(ip netip.Addr) *refusal {
	switch {
	case !ip.IsValid():
		return &refusal{ip, "not an address"}
	case ip.Is4In6(): // before IsLoopback, which reads an IPv4-mapped address as its IPv4 one
		return &refusal{ip, "an IPv4-mapped address"}
	case ip.IsLoopback():
		if p.AllowLoopback {
			return nil
		}
		return &refusal{ip, "a loopback address"}
	case ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified():
		return &refusal{ip, "a private, link-local, multicast or unspecified address"}
	}
	for _, b := range blocked {
		if b.Contains(ip) {
			return &refusal{ip, "in the reserved range " + b.String()}
		}
	}
	return nil
}

// logRefusal records a refusal for operators, with the host it was about.
func (p Policy) logRefusal(ctx context.Context, level slog.Level, msg, host string, r *refusal) {
	if p.Logger != nil {
		p.Logger.Log(ctx, level, msg, "host", host, "addr", r.addr.String(), "why", r.why)
	}
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
	addrs, err := p.lookup(rctx, host)
	if err != nil {
		return nil // not resolvable now: the dial-time check decides at each delivery
	}
	for _, a := range addrs {
		// The resolver gives an IPv4 address as an IPv4-mapped one: it is the IPv4 address.
		if r := p.refuse(a.Unmap()); r != nil {
			p.logRefusal(ctx, slog.LevelDebug, "webhook endpoint refused: its host resolves to a forbidden address", host, r)
			return r
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
				return &refusal{why: "an unreadable address " + address}
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return &refusal{why: "an unreadable address " + address}
			}
			// The connection's address: an IPv4-mapped one connects to the IPv4 address.
			if r := p.refuse(ip.Unmap()); r != nil {
				return r
			}
			return nil
		},
	}
	// A refused connection's error names its address ("dial tcp 10.0.0.1:443: ..."), and
	// the error is stored where the client sees it: only the refusal is returned, and the
	// address is logged.
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		var c net.Conn
		var err error
		if p.Lookup != nil {
			c, err = p.dialResolved(ctx, dialer, network, address)
		} else {
			c, err = dialer.DialContext(ctx, network, address)
		}
		if r := (*refusal)(nil); errors.As(err, &r) {
			host, _, _ := net.SplitHostPort(address)
			p.logRefusal(ctx, slog.LevelWarn, "webhook connection refused: forbidden address", host, r)
			return nil, r
		}
		return c, err
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dial,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// dialResolved dials address with the host name in it resolved by p.Lookup, trying its
// addresses in turn as the dialer does with the system's resolver. The dialer's check
// refuses each forbidden one when its connection is made, as with the system's resolver.
func (p Policy) dialResolved(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return d.DialContext(ctx, network, address)
	}
	addrs, err := p.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	var first error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}
