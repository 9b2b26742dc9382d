package admin

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// reconciliation lists the runs of reconciliation and what they found, with the refund of
// each orphan charge (which may belong to no order).
func (a *console) reconciliation(c *gin.Context) error {
	runs, findings, err := report.Reconciliation(c.Request.Context(), a.Read)
	if err != nil {
		return err
	}
	p := views.ReconciliationPage{Nav: nav(c, "Reconciliation")}
	for _, r := range runs {
		l := views.ReconcileRunLine{ID: r.ID, Process: r.Process, Trigger: "by hand", WindowStart: r.WindowStart,
			WindowEnd: r.WindowEnd, Started: r.StartedAt, Charges: r.ChargesSeen, Orphans: r.Orphans,
			Created: r.CompensationsCreated, Refunds: r.RefundsMade, Mismatches: r.Mismatches, Unpaid: r.PaidWithoutCharge}
		if r.Scheduled {
			l.Trigger = "scheduled"
		}
		if r.FinishedAt != nil {
			l.Finished = *r.FinishedAt
		}
		l.Error = deref(r.Error)
		p.Runs = append(p.Runs, l)
	}
	for _, f := range findings {
		l := views.ReconcileFindingLine{Kind: f.Kind, Charge: f.ChargeID, Detail: f.Detail, Found: f.FoundAt, Seen: f.LastSeenAt,
			Provider: amountOf(f.ProviderAmount, f.ProviderCurrency), Tekrar: amountOf(f.OrderAmount, f.OrderCurrency),
			Compensation: deref(f.CompensationState), Refund: deref(f.RefundID), Error: deref(f.LastError)}
		if f.OrderPublicID != nil {
			l.Order = views.Link{Label: *f.OrderPublicID, Href: "/admin/orders/" + *f.OrderPublicID}
		}
		p.Findings = append(p.Findings, l)
	}
	return a.render(c, http.StatusOK, views.Reconciliation(p))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// amountOf formats an amount that may be missing.
func amountOf(amount *int64, currency *string) string {
	if amount == nil || currency == nil {
		return "—"
	}
	return money.Format(*amount, *currency)
}
