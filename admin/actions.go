package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/operator"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
	"github.com/tekrar/tekrar/views"
)

// The console's actions, for admins: refund an order, release a key that needs attention,
// force a key to expire. Each goes GET confirmation page -> POST form -> 303 to the page of
// what it acted on, with ?done= saying what happened. The form carries the session's CSRF
// token (checkCSRF) and a nonce made for the page, which makes the action idempotent per
// form: posted twice, it acts once and is recorded once in the audit log.

// requireAdmin refuses a viewer: actions are for admins. A viewer is shown no buttons; this
// refuses the URLs themselves, the confirmation page as well as the form's post.
func (a *console) requireAdmin(c *gin.Context) error {
	if !session(c).Operator.CanAct() {
		return forbidden("Only an admin may take actions; you are signed in as a viewer. Ask an admin of this console to do it.")
	}
	c.Next()
	return nil
}

// flashes are the results an action's redirect can name in ?done=. Only these fixed texts
// are ever shown: nothing of the URL reaches the page.
var flashes = map[string]views.FlashMsg{
	"refunded":        {Kind: "ok", Text: "Refund made."},
	"refund-replayed": {Kind: "ok", Text: "This form had been sent already: its refund was made once, and nothing more was refunded."},
	"refund-pending":  {Kind: "warn", Text: "Refund recorded, but the payment provider has not confirmed it yet. It is finished automatically; do not refund again."},

	"release-" + operator.OutcomePaid:            {Kind: "ok", Text: "Released: the provider had the charge, and it succeeded. The order is paid."},
	"release-" + operator.OutcomeDeclined:        {Kind: "ok", Text: "Released: the provider had the charge, and it was declined. The order is declined."},
	"release-" + operator.OutcomeCanceled:        {Kind: "ok", Text: "Released: the provider has no charge for this key. Nothing was charged; the order is canceled."},
	"release-" + operator.OutcomeRefunded:        {Kind: "ok", Text: "Released: the refund is finished."},
	"release-" + operator.OutcomeStillUnknown:    {Kind: "error", Text: "Not released: the payment provider still cannot say what happened. Nothing was changed; try again later."},
	"release-" + operator.OutcomeProviderRefused: {Kind: "error", Text: "Not released: the payment provider refused. Nothing was changed; this needs a closer look."},
	"release-" + operator.OutcomeNotNeeded:       {Kind: "warn", Text: "Nothing to release: the key does not need attention (any more)."},

	"expired":                {Kind: "ok", Text: "The key has expired: retries with it are refused, and the sweeper removes it on its next pass."},
	"sessions-ended":         {Kind: "ok", Text: "The operator's sessions have ended: they must sign in again."},
	"sessions-ended-already": {Kind: "warn", Text: "This form had been sent already: the sessions it ended stay ended, and nothing more was ended."},
	"expire-" + operator.OutcomeAlreadyExpired: {Kind: "warn", Text: "Nothing to do: the key had expired already."},

	"redelivery-queued":         {Kind: "ok", Text: "Redelivery queued: it is sent within seconds, with the same webhook-id, and shows below as a redelivery attempt."},
	"redelivery-queued-already": {Kind: "warn", Text: "This form had been sent already: its redelivery was queued once, and nothing more was queued."},
	"resend-queued":             {Kind: "ok", Text: "Resend queued: the endpoint is enabled, and every event of the window it had not received is sent within seconds, each under its own webhook-id."},
	"resend-queued-already":     {Kind: "warn", Text: "This form had been sent already: its resend was queued once, and nothing more was queued."},
}

// flash shows the result named by ?done= on the page the action redirected to.
func flash(c *gin.Context) {
	if m, ok := flashes[c.Query("done")]; ok && c.Request.Method == http.MethodGet {
		c.Request = c.Request.WithContext(views.WithFlash(c.Request.Context(), m))
	}
	c.Next()
}

// recorder returns the operator.Recorder that writes an action in the audit log, in the
// transaction of its effect.
func (a *console) recorder(c *gin.Context, action, target, nonce string, base map[string]any) operator.Recorder {
	op := session(c).Operator.ID
	return func(ctx context.Context, tx *sqlx.Tx, detail map[string]any) error {
		for k, v := range base {
			detail[k] = v
		}
		return RecordAudit(ctx, tx, AuditRecord{At: a.Now(), OperatorID: op, Action: action, Target: target,
			Nonce: nonce, Detail: detail})
	}
}

// operatorMeta is what the key history of an action's refund shows as its sender.
func operatorMeta(c *gin.Context) checkout.Meta {
	return checkout.Meta{RequestID: server.RequestID(c), RemoteAddr: c.ClientIP(),
		UserAgent: "console (" + session(c).Operator.Email + ")"}
}

func (a *console) refundForm(c *gin.Context) error {
	t, err := a.refundTarget(c)
	if err != nil {
		return err
	}
	adv, err := a.refundAdvice(c.Request.Context(), t.OrderID)
	if err != nil {
		return err
	}
	return a.render(c, http.StatusOK, refundPage(c, t, adv, "", "", ""))
}

// refundAdvice is adviseTap of the suspected double tap of order id (see
// report.DoubleTapsOf), if it is part of one, else of the order alone: the refund form
// prefills what is left to refund of the purchase, at most what this order can be
// refunded, and warns before more is refunded.
func (a *console) refundAdvice(ctx context.Context, id int64) (tapAdvice, error) {
	d, err := report.GetOrderDetail(ctx, a.DB, id)
	if err != nil {
		return tapAdvice{}, fmt.Errorf("refund: %w", err)
	}
	_, group, err := a.doubleTapOf(ctx, a.DB, d.OrderRow)
	if err != nil {
		return tapAdvice{}, err
	}
	if len(group) == 0 {
		// The order alone: what of it may be refunded (an installment order's first charge).
		charges, err := report.ChargesOf(ctx, a.DB, []int64{id})
		if err != nil {
			return tapAdvice{}, fmt.Errorf("refund: %w", err)
		}
		group = []tapOrder{tapOrderOf(d.OrderRow, charges[id])}
	}
	return adviseTap(group), nil
}

func (a *console) refund(c *gin.Context) error {
	t, err := a.refundTarget(c)
	if err != nil {
		return err
	}
	adv, err := a.refundAdvice(c.Request.Context(), t.OrderID)
	if err != nil {
		return err
	}
	amountText, reason := strings.TrimSpace(c.PostForm("amount")), strings.TrimSpace(c.PostForm("reason"))
	amount, err := money.Parse(amountText, t.Currency)
	if err != nil {
		return a.render(c, http.StatusUnprocessableEntity, refundPage(c, t, adv, amountText, reason, err.Error()))
	}
	// More than is left of the purchase refunds the customer twice: only with the id typed.
	if prefill, _, confirm := adv.refundForm(t.PublicID); confirm && amount > prefill &&
		strings.TrimSpace(c.PostForm("confirm")) != t.PublicID {
		return a.render(c, http.StatusUnprocessableEntity, refundPage(c, t, adv, amountText, reason,
			fmt.Sprintf("Nothing was refunded: %s is more than is left to refund for the customer to pay once (%s); type this order's id to confirm that the customer is to be refunded more.",
				money.Format(amount, t.Currency), money.Format(prefill, t.Currency))))
	}
	nonce := c.PostForm("nonce")
	res, err := a.Operator.RefundAsOperator(c.Request.Context(), operator.OperatorRefund{
		OrderID: t.PublicID, RefundInput: checkout.RefundInput{Amount: amount, Reason: reason},
		Nonce: nonce, Meta: operatorMeta(c),
	})
	var p *problem.Problem
	switch {
	case errors.Is(err, operator.ErrInvalidNonce):
		return a.render(c, http.StatusBadRequest, refundPage(c, t, adv, amountText, reason, "The form was incomplete; check it and confirm again."))
	case errors.As(err, &p):
		// Refused before anything was stored (over-refund, not refundable, a changed form):
		// the page comes back with a new nonce, for a new attempt.
		if fresh, err := checkout.GetRefundTarget(c.Request.Context(), a.DB, t.PublicID); err == nil {
			t = fresh
		}
		return a.render(c, p.Status, refundPage(c, t, adv, amountText, reason, problemText(p)))
	case err != nil:
		return err
	}
	outcome := "refunded"
	if res.Pending {
		outcome = "pending"
	}
	_, err = RecordAuditOnce(c.Request.Context(), a.DB, AuditRecord{
		At: a.Now(), OperatorID: session(c).Operator.ID, Action: ActionRefund, Target: orderTarget(t.PublicID), Nonce: nonce,
		Detail: map[string]any{"outcome": outcome, "order_id": t.PublicID, "client_id": res.ClientID, "key": res.Key,
			"refund_id": res.Refund.ID, "amount": res.Refund.Amount, "currency": res.Refund.Currency,
			"reason": res.Refund.Reason},
	})
	if err != nil {
		// The refund is made; only its record is missing. Posting the same form again
		// replays the refund (nothing more is refunded) and records it.
		return fmt.Errorf("refund %s of order %s made, but not recorded: %w", res.Refund.ID, t.PublicID, err)
	}
	done := "refunded"
	switch {
	case res.Pending:
		done = "refund-pending"
	case res.Replayed:
		done = "refund-replayed"
	}
	c.Redirect(http.StatusSeeOther, orderHref(t.PublicID)+"?done="+done)
	return nil
}

// refundTarget reads the order of /orders/:id/refund: checkout.ErrOrderNotFound (a 404)
// if there is none.
func (a *console) refundTarget(c *gin.Context) (checkout.RefundTarget, error) {
	t, err := checkout.GetRefundTarget(c.Request.Context(), a.DB, c.Param("id"))
	if err != nil {
		return checkout.RefundTarget{}, fmt.Errorf("refund target: %w", err)
	}
	return t, nil
}

// refundPage is the refund's confirmation page, with a new nonce. amount and reason are
// what the operator typed ("" on a first visit: what is left to refund). adv is the advice
// of the order's suspected double tap, if it is part of one: the page prefills at most what
// is left to refund of the purchase, warns, and asks for the order's id typed out to refund
// more.
func refundPage(c *gin.Context, t checkout.RefundTarget, adv tapAdvice, amount, reason, errText string) templ.Component {
	left := t.Refundable()
	v := views.ConfirmView{
		Nav:   nav(c, "Orders"),
		Title: "Refund order " + t.PublicID,
		Subject: []views.Field{
			{Label: "Order", Value: fmt.Sprintf("%s (%s)", t.PublicID, t.Status), Href: orderHref(t.PublicID)},
			field("Client", fmt.Sprintf("%s (%d)", t.ClientName, t.ClientID)),
			field("Customer", strings.TrimSpace(t.CustomerID+" "+t.CustomerEmail)),
			field("Captured", money.Format(t.Captured, t.Currency)),
			field("Refunded or being refunded", money.Format(t.Refunded, t.Currency)),
			field("Left to refund", money.Format(left, t.Currency)),
		},
		Explain: []string{
			"The customer's card is refunded the amount below, at most what is left. It goes the way of a refund the app asks for through the API, under the order's client, and shows in the order's refunds and in the audit log.",
			"Confirming twice (a double click, a resent form) refunds once. A refund cannot be undone.",
		},
		Error:  errText,
		Action: orderHref(t.PublicID) + "/refund",
		Nonce:  randomToken(),
		Button: "Refund",
		Cancel: orderHref(t.PublicID),
	}
	switch {
	case !checkout.ChargedStatuses.Has(t.Status):
		v.Refused = "Only a paid order can be refunded; this one is " + t.Status + "."
	case t.Status == checkout.StatusDisputed:
		v.Refused = disputedNotRefundable
	case left <= 0:
		v.Refused = "This order is refunded in full: nothing is left to refund."
	}
	prefill := left
	confirmID := ""
	p, warning, confirm := adv.refundForm(t.PublicID)
	if len(adv.orders) > 0 {
		prefill = min(p, left)
	}
	if warning != "" {
		v.Warning = warning
		if confirm {
			confirmID = t.PublicID
		}
		for _, o := range adv.orders {
			if o.PublicID == t.PublicID {
				continue
			}
			first, second := o.PublicID, t.PublicID
			if slices.IndexFunc(adv.orders, func(x tapOrder) bool { return x.PublicID == t.PublicID }) <
				slices.IndexFunc(adv.orders, func(x tapOrder) bool { return x.PublicID == o.PublicID }) {
				first, second = second, first
			}
			v.Links = append(v.Links, views.Link{Label: "Compare with order " + o.PublicID, Href: pairHref(first, second)})
		}
	}
	if amount == "" && prefill > 0 {
		// Nothing left of the purchase to refund: no amount is offered; one refunding anyway
		// types it, as well as the order's id.
		amount = strings.TrimSuffix(money.Format(prefill, t.Currency), " "+t.Currency)
	}
	return views.RefundConfirmPage(v, amount, t.Currency, reason, confirmID)
}

// problemText is a problem as an operator reads it, with its code for the API's docs.
func problemText(p *problem.Problem) string {
	s := p.Title
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	return s + " (" + string(p.Code) + ")"
}
