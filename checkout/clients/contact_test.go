package clients_test

import (
	"testing"

	"github.com/tekrar/tekrar/checkout/clients"
)

// A contact e-mail is one ordinary mailbox: what a mail server would route somewhere
// inside tekrar's network, or what splits a header, is refused.
func TestCheckContactEmail(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"ops@shop.example", true},
		{"first.last+hooks@mail.shop.example", true},
		{"a@[10.0.0.1]", false},
		{"a@[127.0.0.1]", false},
		{"a@localhost", false},
		{"a%b@shop.example", false},
		{"Ops <ops@shop.example>", false},
		{"ops@shop.example, other@shop.example", false},
		{"ops@shop.example\r\nBcc: x@y.example", false},
		{"ops@.example", false},
		{"ops@shop..example", false},
		{"@shop.example", false},
		{"ops", false},
	} {
		if err := clients.CheckContactEmail(c.addr); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok %v", c.addr, err, c.ok)
		}
	}
}
