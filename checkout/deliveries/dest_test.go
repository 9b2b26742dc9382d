package deliveries_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/deliveries"
)

// In production only https to a public address is accepted; tekrar dev's policy also
// accepts http and loopback, and nothing else private.
func TestEndpointURLPolicy(t *testing.T) {
	cases := []struct {
		url        string
		production bool // accepted in production
		dev        bool // accepted with AllowLoopback
	}{
		{"https://93.184.215.14/hooks", true, true},
		{"http://93.184.215.14/hooks", false, true},
		{"https://127.0.0.1/hooks", false, true},
		{"https://127.8.9.10:8443/hooks", false, true},
		{"https://[::1]/hooks", false, true},
		{"https://localhost/hooks", false, true},
		{"https://api.localhost/hooks", false, true},
		{"https://[::ffff:127.0.0.1]/hooks", false, false}, // IPv4-mapped: write 127.0.0.1
		{"https://[::7f00:1]/hooks", false, false},         // IPv4-compatible ::/96
		{"https://[::a00:1]/hooks", false, false},
		{"https://[::a9fe:a9fe]/hooks", false, false},
		{"https://[2002:a9fe:a9fe::1]/hooks", false, false},
		{"https://[64:ff9b:1::a9fe:a9fe]/hooks", false, false},
		{"https://[5f00::1]/hooks", false, false},
		{"https://10.0.0.8/hooks", false, false},
		{"https://172.16.3.4/hooks", false, false},
		{"https://192.168.1.1/hooks", false, false},
		{"https://169.254.169.254/latest/meta-data", false, false},
		{"https://100.64.0.1/hooks", false, false},
		{"https://0.0.0.0/hooks", false, false},
		{"https://[fd00::1]/hooks", false, false},
		{"https://[fe80::1]/hooks", false, false},
		{"https://[::ffff:10.0.0.1]/hooks", false, false},
		{"https://[64:ff9b::a00:1]/hooks", false, false},
		{"https://[::]/hooks", false, false},
		{"https://224.0.0.1/hooks", false, false},
		{"ftp://93.184.215.14/hooks", false, false},
		{"https://user:pw@93.184.215.14/hooks", false, false},
		{"/hooks", false, false},
		{"https:///hooks", false, false},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			if err := (deliveries.Policy{}).CheckURL(ctx, c.url); (err == nil) != c.production {
				t.Errorf("production: %v, want accepted=%v", err, c.production)
			}
			if err := (deliveries.Policy{AllowLoopback: true}).CheckURL(ctx, c.url); (err == nil) != c.dev {
				t.Errorf("dev: %v, want accepted=%v", err, c.dev)
			}
		})
	}
}

// The address is checked again when the connection is made, after name resolution: a name
// that resolves to loopback (here localhost, as DNS rebinding would make any name do) is
// refused in production, though no URL check saw an address.
func TestDialRefusesForbiddenAddresses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	for _, u := range []string{"http://localhost" + port, srv.URL, "http://[::ffff:127.0.0.1]" + port} {
		_, err := deliveries.NewHTTPClient(deliveries.Policy{}, time.Second).Get(u)
		if !errors.Is(err, deliveries.ErrForbiddenDestination) {
			t.Errorf("production GET %s: %v, want %v", u, err, deliveries.ErrForbiddenDestination)
		}
	}
	resp, err := deliveries.NewHTTPClient(deliveries.Policy{AllowLoopback: true}, time.Second).Get("http://localhost" + port)
	if err != nil {
		t.Fatalf("dev GET localhost: %v", err)
	}
	resp.Body.Close()
	// Redirects are not followed: a 3xx is the attempt's answer.
	redirect := httptest.NewServer(http.RedirectHandler("http://169.254.169.254/", http.StatusFound))
	defer redirect.Close()
	resp, err = deliveries.NewHTTPClient(deliveries.Policy{AllowLoopback: true}, time.Second).Post(redirect.URL, "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("a redirect: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestCheckAddrPrivateRanges(t *testing.T) {
	for _, a := range []string{"10.1.2.3", "169.254.169.254", "fd12::1", "::1", "127.0.0.1", "198.18.0.1", "fe80::abcd"} {
		if err := (deliveries.Policy{}).CheckAddr(netip.MustParseAddr(a)); !errors.Is(err, deliveries.ErrForbiddenDestination) {
			t.Errorf("%s: %v", a, err)
		}
	}
}

// Every range of IANA's IPv4 and IPv6 special-purpose registries that is not globally
// reachable is refused, and the ranges that embed or translate to an IPv4 address whatever
// it is (IPv4-compatible ::/96, IPv4-mapped, NAT64, 6to4, Teredo). The refusal does not say
// which address or which range: it reaches the client.
func TestCheckAddrRefusesReservedRanges(t *testing.T) {
	cases := []struct {
		addr string
		dev  bool // accepted with AllowLoopback
		prod bool // accepted in production
	}{
		{"::7f00:1", false, false},    // IPv4-compatible 127.0.0.1
		{"::a00:1", false, false},     // IPv4-compatible 10.0.0.1
		{"::a9fe:a9fe", false, false}, // IPv4-compatible 169.254.169.254
		{"::5db8:d70e", false, false}, // IPv4-compatible public: the whole range is deprecated
		{"::ffff:127.0.0.1", false, false},
		{"::ffff:93.184.215.14", false, false},                 // IPv4-mapped, even of a public address
		{"::ffff:0:a00:1", false, false},                       // SIIT IPv4-translated
		{"64:ff9b::a9fe:a9fe", false, false},                   // NAT64
		{"64:ff9b:1::1", false, false},                         // local-use NAT64
		{"2002:7f00:1::1", false, false},                       // 6to4 of 127.0.0.1
		{"2002:5db8:d70e::1", false, false},                    // 6to4 of a public address
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", false, false}, // Teredo
		{"2001:2::1", false, false},                            // benchmarking
		{"2001:10::1", false, false},                           // ORCHID
		{"2001:db8::1", false, false},                          // documentation
		{"3fff::1", false, false},                              // documentation
		{"3fff:fff:ffff::1", false, false},
		{"5f00::1", false, false},      // SRv6 SIDs
		{"100::1", false, false},       // discard-only
		{"100:0:0:1::1", false, false}, // dummy prefix
		{"fec0::1", false, false},      // site-local
		{"fd00::1", false, false},
		{"fe80::1", false, false},
		{"ff02::1", false, false},
		{"::", false, false},
		{"::1", true, false},
		{"127.0.0.1", true, false},
		{"0.1.2.3", false, false},
		{"10.0.0.1", false, false},
		{"100.100.100.200", false, false}, // shared address space, where some clouds answer metadata
		{"169.254.169.254", false, false},
		{"172.31.255.255", false, false},
		{"192.0.0.8", false, false},
		{"192.0.2.1", false, false},
		{"192.88.99.1", false, false},
		{"192.168.0.1", false, false},
		{"198.19.255.255", false, false},
		{"198.51.100.1", false, false},
		{"203.0.113.1", false, false},
		{"224.0.0.251", false, false},
		{"240.0.0.1", false, false},
		{"255.255.255.255", false, false},
		{"93.184.215.14", true, true},
		{"8.8.8.8", true, true},
		{"2606:4700:4700::1111", true, true},
		{"2001:3::1", true, true}, // AMT: globally reachable
		{"2001:4860:4860::8888", true, true},
	}
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			a := netip.MustParseAddr(c.addr)
			for _, p := range []struct {
				policy deliveries.Policy
				want   bool
			}{{deliveries.Policy{}, c.prod}, {deliveries.Policy{AllowLoopback: true}, c.dev}} {
				err := p.policy.CheckAddr(a)
				if (err == nil) != p.want {
					t.Errorf("AllowLoopback=%v: %v, want accepted=%v", p.policy.AllowLoopback, err, p.want)
				}
				if err != nil && (!errors.Is(err, deliveries.ErrForbiddenDestination) || tellsWhere(err.Error(), a)) {
					t.Errorf("AllowLoopback=%v: the refusal %q is not a bare forbidden destination", p.policy.AllowLoopback, err)
				}
			}
		})
	}
}

// tellsWhere reports whether a refusal's text names the address or a range.
func tellsWhere(text string, a netip.Addr) bool {
	return strings.Contains(text, a.String()) || strings.Contains(text, a.Unmap().String()) || prefixText.MatchString(text) ||
		strings.Contains(text, "range")
}

var prefixText = regexp.MustCompile(`[0-9a-fA-F.:]/[0-9]{1,3}\b`) // 10.0.0.0/8, 2002::/16

// staticLookup resolves each name to the addresses given, and nothing else.
func staticLookup(names map[string][]netip.Addr) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := names[host]; ok {
			return a, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
}

// A name that resolves to a forbidden address is refused when the endpoint is registered
// and again at every connection, and neither refusal tells what the name resolves to. The
// resolver hands IPv4 addresses over as IPv4-mapped ones (as Go's does): those are checked
// as the IPv4 address they are, so a public one is accepted.
func TestForbiddenNameIsRefusedWithoutTellingWhere(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	forbidden := []string{"::7f00:1", "::a00:1", "::a9fe:a9fe", "::ffff:7f00:1", "127.0.0.1", "10.0.0.1", "169.254.169.254",
		"64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "5f00::1", "3fff::1", "2001:2::1"}
	for _, addr := range forbidden {
		t.Run(addr, func(t *testing.T) {
			a := netip.MustParseAddr(addr)
			p := deliveries.Policy{Lookup: staticLookup(map[string][]netip.Addr{"hooks.example": {a}})}
			err := p.CheckURL(context.Background(), "https://hooks.example/in")
			if !errors.Is(err, deliveries.ErrForbiddenDestination) || tellsWhere(err.Error(), a) {
				t.Errorf("registering: %v, want a bare %v", err, deliveries.ErrForbiddenDestination)
			}
			_, err = deliveries.NewHTTPClient(p, time.Second).Get("http://hooks.example" + port + "/in")
			if !errors.Is(err, deliveries.ErrForbiddenDestination) || tellsWhere(err.Error(), a) {
				t.Errorf("connecting: %v, want a bare %v", err, deliveries.ErrForbiddenDestination)
			}
		})
	}
	public := deliveries.Policy{Lookup: staticLookup(map[string][]netip.Addr{"hooks.example": {netip.MustParseAddr("::ffff:93.184.215.14")}})}
	if err := public.CheckURL(context.Background(), "https://hooks.example/in"); err != nil {
		t.Errorf("a public IPv4 address as the resolver gives it: %v", err)
	}
	// localhost through the system's resolver: the refusal at the connection does not name
	// the loopback address either.
	_, err := deliveries.NewHTTPClient(deliveries.Policy{}, time.Second).Get("http://localhost" + port)
	if !errors.Is(err, deliveries.ErrForbiddenDestination) || strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "::1") {
		t.Errorf("localhost: %v, want a bare %v", err, deliveries.ErrForbiddenDestination)
	}
}

// A name that resolved to a public address when the endpoint was registered and resolves
// to a forbidden one at delivery time (DNS rebinding) fails every attempt, and what is
// stored and shown to the client (each attempt's error, the delivery's last error, the
// disabled endpoint's reason) does not say where the name pointed.
func TestRebindingRefusalStoresNoAddress(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	resolved := netip.MustParseAddr("93.184.215.14")
	policy := deliveries.Policy{Lookup: func(context.Context, string) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		return []netip.Addr{resolved}, nil
	}}
	f.store.Policy = policy
	f.deliverer.Client = deliveries.NewHTTPClient(policy, 300*time.Millisecond)
	client := f.client(t, "rebinding app")
	e := f.endpoint(t, client, "https://hooks.example/in")
	mu.Lock()
	resolved = netip.MustParseAddr("::a9fe:a9fe")
	mu.Unlock()
	f.event(t, client, "order.paid", 1)
	if n := f.drive(t); n < 2 {
		t.Fatalf("%d attempts", n)
	}
	var texts []string
	if err := f.db.Select(&texts, `
		SELECT a.error FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
		UNION ALL SELECT last_error FROM webhook_deliveries
		UNION ALL SELECT disabled_reason FROM webhook_endpoints WHERE disabled_reason IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.Get(context.Background(), client, e.ID)
	if err != nil || got.DisabledReason == nil {
		t.Fatalf("the endpoint is not disabled: %+v %v", got, err)
	}
	for _, s := range texts {
		if !strings.Contains(s, deliveries.ErrForbiddenDestination.Error()) || tellsWhere(s, resolved) || strings.Contains(s, "169.254") {
			t.Errorf("stored: %q", s)
		}
	}
}
