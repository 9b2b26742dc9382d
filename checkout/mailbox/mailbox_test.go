package mailbox

import (
	"errors"
	"strings"
	"testing"
)

// TestCheck: ordinary mailboxes pass; the addresses issue 30 found accepted (address
// literals, localhost, % routing) and every other way to name a host or several mailboxes
// are refused.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"ayse@example.com", true},
		{"Ayse.Yilmaz+receipts@Mail.Example.COM", true},
		{"o'brien@shop.co.uk", true},
		{"a_b-c=d@xn--kahve-dkkan-6ib.com.tr", true},
		{"x@a-b.example", true},
		{strings.Repeat("a", 64) + "@example.com", true},
		{strings.Repeat("a", 64) + "@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 57) + ".com", true},

		{"", false},
		{"a@[10.0.0.1]", false},
		{"a@[127.0.0.1]", false},
		{"a@[IPv6:::1]", false},
		{"a@localhost", false},
		{"a@LOCALHOST", false},
		{"a@mail.localhost", false},
		{"a%b@x", false},
		{"a%b@example.com", false},
		{"a!b@example.com", false},
		{"b!a@example.com", false},
		{`"a b"@example.com`, false},
		{`"ab"@example.com`, false},
		{`a\b@example.com`, false},
		{"a@10.0.0.1", false},
		{"a@127.0.0.1", false},
		{"a@0x7f.1", false},
		{"a@example.123", false},
		{"a@intranet", false},
		{"a@example..com", false},
		{"a@.example.com", false},
		{"a@example.com.", false},
		{"a@-example.com", false},
		{"a@example-.com", false},
		{"a@exa_mple.com", false},
		{"a@ex ample.com", false},
		{"a@exämple.com", false},
		{"äyse@example.com", false},
		{".a@example.com", false},
		{"a.@example.com", false},
		{"a..b@example.com", false},
		{"a@b@example.com", false},
		{"Ayse <ayse@example.com>", false},
		{"<ayse@example.com>", false},
		{"ayse@example.com (Ayse)", false},
		{"ayse@example.com, b@example.com", false},
		{"ayse@example.com\r\nBcc: evil@attacker.example", false},
		{" ayse@example.com", false},
		{"@example.com", false},
		{"ayse@", false},
		{"ayse", false},
		{strings.Repeat("a", 65) + "@example.com", false},
		{"a@" + strings.Repeat("b", 64) + ".com", false},
		{"a@" + strings.Repeat(strings.Repeat("b", 60)+".", 5) + "com", false}, // 310 characters
	} {
		err := Check(tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want ok %v", tc.addr, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%q) = %v, not ErrInvalid", tc.addr, err)
		}
	}
}

// TestPlainText: one line of printable text, in any script, passes; what could start a
// header or a line, or reorder what a reader sees, is refused.
func TestPlainText(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"", true},
		{"Latte", true},
		{"Türk kahvesi, çifte kavrulmuş ☕ 250 g", true},
		{"拿铁 / لاتيه", true},
		{"Latte\r\nBcc: evil@attacker.example", false},
		{"Latte\n", false},
		{"Lat\tte", false},
		{"Lat\x00te", false},
		{"Lat\x1bte", false},
		{"Lat\u0085te", false}, // NEL
		{"Lat\u2028te", false}, // line separator
		{"Lat\u2029te", false}, // paragraph separator
		{"Latte \u202egnp.exe", false},
		{"Latte \u2066x\u2069", false},
		{"Latte \u200fx", false}, // right-to-left mark
	} {
		if got := PlainText(tc.s); got != tc.ok {
			t.Errorf("PlainText(%q) = %v, want %v", tc.s, got, tc.ok)
		}
	}
}
