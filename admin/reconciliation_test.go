package admin_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/reconcile"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/apptest"
)

// A charge of no order, refunded by reconciliation, shows on the reconciliation page with its
// refund, and in the audit log as the process's entry; the pages that show compensations
// and orders still render with a compensation that has no order.
func TestReconciliationPageShowsOrphanCharges(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	if p := b.do("GET", "/admin/reconciliation", nil); p.status != http.StatusOK || !strings.Contains(p.body, "No run yet") {
		t.Fatalf("reconciliation page before any run: %d", p.status)
	}
	id := actOrder(t, e, "k-paid", 4500)
	ctx := context.Background()
	sb := psp.NewSandbox(e.DB, psp.SandboxOptions{})
	stray, err := sb.Charge(ctx, psp.ChargeRequest{Key: "stray-<b>", Amount: 1234, Currency: "TRY", CardToken: psp.TokenVisa,
		Description: "<script>alert(1)</script>"})
	if err != nil {
		t.Fatal(err)
	}
	// By hand, as `tekrar reconcile` runs it.
	rc := reconcile.New(e.DB, sb, e.App.Service, app.ReconcileConfig(e.Config, e.Clock.Now, nil, false), slog.New(slog.DiscardHandler))
	res, err := rc.Run(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil || res.RefundsMade != 1 {
		t.Fatalf("reconcile: %+v %v", res, err)
	}
	p := b.do("GET", "/admin/reconciliation", nil)
	for _, want := range []string{stray.ID, "orphan_charge", "refunded", "12.34 TRY", "by hand"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the reconciliation page lacks %q", want)
		}
	}
	if strings.Contains(p.body, "<script>alert") {
		t.Error("the page shows provider text unescaped")
	}
	p = b.do("GET", "/admin/audit", nil)
	for _, want := range []string{"reconcile@", "compensate_orphan_charge", "charge:" + stray.ID} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the audit page lacks %q", want)
		}
	}
	for _, page := range []string{"/admin", "/admin/orders", "/admin/orders/" + id, "/admin/keys"} {
		if p := b.do("GET", page, nil); p.status != http.StatusOK {
			t.Errorf("%s with a compensation of no order: %d", page, p.status)
		}
	}
}
