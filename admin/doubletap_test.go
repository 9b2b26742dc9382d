package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// A customer tapped pay twice and was charged twice; the operator refunds the first order
// in full. Everything the console shows afterwards must follow from that refund: the order
// says refunded and offers no refund, its page names its partner, the pair's advice does
// not say "refund the second in full", and refunding the second anyway takes the order's
// id typed out. Before, the advice looked at the second order alone, and following it
// refunded the customer twice.
func TestDoubleTapRefundedOnce(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	first := actOrder(t, e, "tap-one", 4500)
	second := actOrder(t, e, "tap-two", 4500)
	e.App.Service.FlushHistory()
	ids := func(id string) string { return id }
	firstPage, secondPage := "/admin/orders/"+ids(first), "/admin/orders/"+ids(second)
	pair := "/admin/orders/pair?first=" + ids(first) + "&second=" + ids(second)

	// Before any refund: the pair page advises refunding the second; each order page names the other.
	if advice := b.do("GET", pair, nil).doc.Find(".verdict .advice").Text(); !strings.Contains(advice, "refund the second order ("+ids(second)+") in full") {
		t.Fatalf("pair advice before any refund: %s", advice)
	}
	for _, p := range []string{firstPage, secondPage} {
		op := b.do("GET", p, nil)
		if op.doc.Find(`.verdict.twice a[href="`+pair+`"]`).Length() != 1 {
			t.Errorf("%s does not link its double-tap partner: %s", p, op.doc.Find(".verdict").Text())
		}
	}

	// Refund the first in full.
	confirm := b.do("GET", firstPage+"/refund", nil)
	if confirm.doc.Find(`input[name=confirm]`).Length() != 0 {
		t.Fatal("the first refund of a double tap asks for a typed confirmation")
	}
	if p := b.do("POST", firstPage+"/refund", actForm(t, confirm, firstPage+"/refund")); p.status != http.StatusSeeOther {
		t.Fatalf("refund the first: %d %s", p.status, p.body)
	}
	done := b.do("GET", firstPage+"?done=refunded", nil)
	if got := strings.TrimSpace(done.doc.Find("h1 .state").Text()); got != "refunded" {
		t.Errorf("badge after a full refund: %q", got)
	}
	if done.doc.Find(`a[href="`+firstPage+`/refund"]`).Length() != 0 {
		t.Error("the Refund button stays after a full refund")
	}
	if done.doc.Find("#order-actions .flash.ok").Length() != 1 || done.doc.Find("#order-actions").Nodes[0] == nil {
		t.Error("no result of the refund")
	}
	// The result comes before the verdict and the order's sections, not below them.
	if html, _ := done.doc.Find("main").Html(); strings.Index(html, "flash ok") > strings.Index(html, "verdict") {
		t.Error("the refund's result is below the verdict")
	}

	cases := []struct {
		page     string
		want     []string
		notWants []string
	}{
		{pair, []string{"45.00 TRY on order " + ids(first), "Nothing more to refund"}, []string{"in full, from its page"}},
		{secondPage, []string{"Nothing more to refund"}, []string{"in full, from its page"}},
	}
	for _, c := range cases {
		advice := b.do("GET", c.page, nil).doc.Find(".verdict .advice").Text()
		for _, w := range c.want {
			if !strings.Contains(advice, w) {
				t.Errorf("%s: advice lacks %q: %s", c.page, w, advice)
			}
		}
		for _, w := range c.notWants {
			if strings.Contains(advice, w) {
				t.Errorf("%s: advice says %q: %s", c.page, w, advice)
			}
		}
	}

	// Refunding the second anyway: warned, offered no amount (nothing is left to refund of
	// the purchase), and refused until its id is typed.
	confirm = b.do("GET", secondPage+"/refund", nil)
	if w := confirm.doc.Find(".confirm .warning").Text(); !strings.Contains(w, "order "+ids(first)) || !strings.Contains(w, "twice") {
		t.Fatalf("no warning on the second's refund page: %q", w)
	}
	if got, _ := confirm.doc.Find(`input[name=amount]`).Attr("value"); got != "" {
		t.Errorf("the second's refund form offers %q with nothing left to refund", got)
	}
	for _, typed := range []string{"", ids(first), "yes"} {
		p := b.do("POST", secondPage+"/refund", actForm(t, confirm, secondPage+"/refund", "confirm", typed, "amount", "45.00"))
		if p.status != http.StatusUnprocessableEntity {
			t.Errorf("confirm %q: %d, want 422", typed, p.status)
		}
		if n := actInt(t, e, `SELECT count(*) FROM refunds r JOIN orders o ON o.id = r.order_id WHERE o.public_id = $1`, second); n != 0 {
			t.Fatalf("confirm %q refunded the second order", typed)
		}
		confirm = p
	}
	p := b.do("POST", secondPage+"/refund", actForm(t, confirm, secondPage+"/refund", "confirm", ids(second), "amount", "45.00"))
	if p.status != http.StatusSeeOther {
		t.Fatalf("refund the second with its id typed: %d %s", p.status, p.body)
	}
	if n := actInt(t, e, `SELECT count(*) FROM orders WHERE public_id::text = ANY(ARRAY[$1, $2]::text[]) AND status = 'refunded'`, first, second); n != 2 {
		t.Errorf("%d of the two orders refunded", n)
	}
}

// A viewer is not sent to an action it does not have: it is told to ask an admin.
func TestViewerIsToldWhomToAsk(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	id := actOrder(t, e, "k-viewer", 4500)
	again := actOrder(t, e, "k-viewer-again", 4500)
	p := b.do("GET", "/admin/orders/"+id, nil)
	if hint := p.doc.Find("#order-actions").Text(); !strings.Contains(hint, "ask an admin") {
		t.Errorf("a viewer's order page: %q", hint)
	}
	for _, page := range []string{"/admin/orders/" + again,
		"/admin/orders/pair?first=" + id + "&second=" + again} {
		advice := b.do("GET", page, nil).doc.Find(".verdict .advice").Text()
		if strings.Contains(advice, "from its page") || !strings.Contains(advice, "Ask an admin") {
			t.Errorf("%s: a viewer's advice: %s", page, advice)
		}
	}
}
