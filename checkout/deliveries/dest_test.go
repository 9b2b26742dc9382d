package deliveries_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
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
		{"https://[::ffff:127.0.0.1]/hooks", false, true},
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
