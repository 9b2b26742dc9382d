package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A compensation without an order (an orphan charge found by reconciliation) says so instead
// of linking nowhere; one with an order links it.
func TestCompensationWithoutAnOrder(t *testing.T) {
	p := CompensationsPage{States: []string{"all"}, Rows: []CompensationLine{
		{Anchor: "compensation-1", State: "watching", Reason: "orphan"},
		{Anchor: "compensation-2", State: "watching", Reason: "owed", Order: Link{Label: "ord_1", Href: "/admin/orders/ord_1"}},
	}}
	var buf bytes.Buffer
	if err := CompensationsList(p).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if n := strings.Count(html, "no order (orphan charge)"); n != 1 {
		t.Errorf("%d rows say they have no order, want 1", n)
	}
	if !strings.Contains(html, `<a class="order" href="/admin/orders/ord_1">`) {
		t.Error("the row with an order does not link it")
	}
}
