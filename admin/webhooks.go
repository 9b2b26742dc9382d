package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/operator"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/views"
)

// Client webhooks in the console: every client's endpoints (disabled ones first, with why),
// one endpoint's deliveries with their attempts, the dead deliveries, and redelivery: an
// admin's action that queues one more attempt of a delivery, with the same body and the
// same webhook-id (the event's id), so that a receiver that had it already ignores it.

// ActionRedeliverWebhook is a redelivery in the audit log.
const ActionRedeliverWebhook = "redeliver_webhook"

// Redeliverer queues a redelivery in tx (deliveries.Redeliver over the process's River client).
type Redeliverer func(ctx context.Context, tx *sql.Tx, deliveryID int64, nonce string) error

func deliveryTarget(id int64) string { return "webhook_delivery:" + strconv.FormatInt(id, 10) }

func (a *console) webhooks(c *gin.Context) error {
	ctx := c.Request.Context()
	es, err := deliveries.ConsoleEndpoints(ctx, a.DB)
	if err != nil {
		return err
	}
	dead, err := deliveries.DeadDeliveries(ctx, a.DB)
	if err != nil {
		return err
	}
	p := views.WebhooksPage{Nav: nav(c, "Webhooks")}
	for _, e := range es {
		l := endpointLine(e)
		if l.State == "disabled" {
			p.Disabled++
		}
		p.Endpoints = append(p.Endpoints, l)
	}
	p.Dead = deliveryLines(c, dead)
	return a.render(c, http.StatusOK, views.Webhooks(p))
}

func (a *console) webhookEndpoint(c *gin.Context) error {
	e, ds, err := deliveries.ConsoleEndpoint(c.Request.Context(), a.DB, c.Param("id"))
	if err != nil {
		return err
	}
	p := views.WebhookEndpointPage{Nav: nav(c, "Webhooks"), Endpoint: endpointLine(e), Deliveries: deliveryLines(c, ds),
		Export: "/admin/webhooks/" + e.ID + "/deliveries.csv"}
	if e.DeletedAt == nil && session(c).Operator.CanAct() {
		p.ResendHref = resendHref(e.ID)
	}
	return a.render(c, http.StatusOK, views.WebhookEndpoint(p))
}

func endpointLine(e deliveries.EndpointSummary) views.WebhookEndpointLine {
	l := views.WebhookEndpointLine{ID: e.ID, Href: "/admin/webhooks/" + e.ID, Client: fmt.Sprintf("%s (%d)", e.ClientName, e.ClientID),
		Contact: e.ClientContact, URL: e.URL, Types: strings.Join(e.EventTypes, ", "), State: "enabled", Created: e.CreatedAt,
		Pending: e.Pending, Succeeded: e.Succeeded, Dead: e.Dead}
	switch {
	case e.DeletedAt != nil:
		l.State = "deleted"
	case e.DisabledAt != nil:
		l.State, l.Disabled = "disabled", *e.DisabledAt
		if e.DisabledReason != nil {
			l.DisabledReason = *e.DisabledReason
		}
	}
	return l
}

func deliveryLines(c *gin.Context, ds []deliveries.DeliveryLine) []views.WebhookDeliveryLine {
	out := make([]views.WebhookDeliveryLine, 0, len(ds))
	canAct := session(c).Operator.CanAct()
	for _, d := range ds {
		l := views.WebhookDeliveryLine{ID: d.ID, EventID: d.EventID, EventType: d.EventType, State: deliveryState(d.State, d.Attempts),
			Endpoint: views.Link{Label: d.EndpointID, Href: "/admin/webhooks/" + d.EndpointID}, Client: d.ClientName,
			Attempts: d.Attempts, Created: d.CreatedAt, Last: lastOutcome(d.LastStatus, d.LastError)}
		if d.Order != nil {
			l.Order = views.Link{Label: *d.Order, Href: "/admin/orders/" + *d.Order}
			l.EventHref = eventHref(*d.Order, d.EventID)
		}
		if d.NextAttemptAt != nil {
			l.Next = *d.NextAttemptAt
		}
		if d.FinishedAt != nil {
			l.Finished = *d.FinishedAt
		}
		if canAct {
			l.RedeliverHref = redeliverHref(d.ID)
		}
		for _, t := range d.Tries {
			detail := ""
			if t.Error != nil {
				detail = *t.Error
			}
			if t.Response != nil {
				detail = strings.TrimSpace(detail + " " + *t.Response)
			}
			status := "—"
			if t.Status != nil {
				status = strconv.Itoa(*t.Status)
			}
			l.Tries = append(l.Tries, views.WebhookAttemptLine{At: t.At, Manual: t.Manual, Status: status,
				Latency: (time.Duration(t.LatencyMS) * time.Millisecond).String(), Detail: detail})
		}
		out = append(out, l)
	}
	return out
}

func lastOutcome(status *int, errText *string) string {
	switch {
	case errText != nil:
		return *errText
	case status != nil:
		return "HTTP " + strconv.Itoa(*status)
	}
	return "not attempted yet"
}

func redeliverHref(id int64) string {
	return "/admin/webhooks/deliveries/" + strconv.FormatInt(id, 10) + "/redeliver"
}

func (a *console) deliveryParam(c *gin.Context) (deliveries.DeliveryLine, error) {
	id, err := strconv.ParseInt(c.Param("delivery"), 10, 64)
	if err != nil || id <= 0 {
		return deliveries.DeliveryLine{}, deliveries.ErrDeliveryNotFound
	}
	return deliveries.GetDelivery(c.Request.Context(), a.DB, id)
}

func (a *console) redeliverForm(c *gin.Context) error {
	d, err := a.deliveryParam(c)
	if err != nil {
		return err
	}
	return a.render(c, http.StatusOK, redeliverPage(c, d, "", a.Redeliver != nil))
}

func redeliverPage(c *gin.Context, d deliveries.DeliveryLine, errText string, available bool) templ.Component {
	v := views.ConfirmView{
		Nav:   nav(c, "Webhooks"),
		Title: "Redeliver a webhook",
		Subject: []views.Field{
			field("Event (webhook-id)", d.EventID),
			field("Type", d.EventType),
			{Label: "Endpoint", Value: d.EndpointID + " " + d.EndpointURL, Href: "/admin/webhooks/" + d.EndpointID},
			field("Client", d.ClientName),
			field("State", d.State),
			field("Attempts so far", strconv.Itoa(d.Attempts)),
		},
		Explain: []string{
			"One more attempt is made within seconds: the same body, signed now, under the same webhook-id, so that a receiver that applied this event already recognises it and does nothing twice.",
			"If it is answered 2xx, the delivery is succeeded; if not, a dead delivery stays dead (redeliver again once the endpoint is fixed) and a pending one keeps its schedule.",
		},
		Error:  errText,
		Action: redeliverHref(d.ID),
		Nonce:  randomToken(),
		Button: "Redeliver",
		Cancel: "/admin/webhooks/" + d.EndpointID,
	}
	if !available {
		v.Refused = "This process has no job queue to send a redelivery with."
	}
	return views.ConfirmPage(v)
}

// redeliver queues the attempt and records it in the audit log, in one transaction; the
// job is unique per form (its nonce), so a form posted twice queues one attempt.
func (a *console) redeliver(c *gin.Context) error {
	d, err := a.deliveryParam(c)
	if err != nil {
		return err
	}
	nonce := c.PostForm("nonce")
	if !operator.ValidNonce(nonce) || a.Redeliver == nil {
		return a.render(c, http.StatusBadRequest, redeliverPage(c, d, "The form was incomplete; confirm again.", a.Redeliver != nil))
	}
	ctx := c.Request.Context()
	tx, err := a.DB.BeginTxx(db.Detach(ctx), nil)
	if err != nil {
		return fmt.Errorf("redeliver: %w", err)
	}
	defer tx.Rollback()
	recorded, err := RecordAuditOnce(ctx, tx, AuditRecord{At: a.Now(), OperatorID: session(c).Operator.ID,
		Action: ActionRedeliverWebhook, Target: deliveryTarget(d.ID), Nonce: nonce,
		Detail: map[string]any{"event_id": d.EventID, "endpoint": d.EndpointID, "state": d.State}})
	if err != nil {
		return err
	}
	done := "redelivery-queued-already"
	if recorded {
		if err := a.Redeliver(ctx, tx.Tx, d.ID, nonce); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("redeliver: %w", err)
		}
		done = "redelivery-queued"
	}
	c.Redirect(http.StatusSeeOther, "/admin/webhooks/"+d.EndpointID+"?done="+done)
	return nil
}

// ActionResendWebhookWindow is a resend of a window in the audit log.
const ActionResendWebhookWindow = "resend_webhook_window"

// Resender resends, in tx, the events of a window to a client's endpoint
// (deliveries.Store.ResendTx over the process's River client).
type Resender func(ctx context.Context, tx *sqlx.Tx, clientID int64, endpointID string, w deliveries.Window) (deliveries.ResendResult, error)

func resendHref(endpointID string) string { return "/admin/webhooks/" + endpointID + "/resend" }

func (a *console) resendForm(c *gin.Context) error {
	e, _, err := deliveries.ConsoleEndpoint(c.Request.Context(), a.DB, c.Param("id"))
	if err != nil {
		return err
	}
	now := a.Now().UTC().Truncate(time.Second).Add(time.Second) // until is excluded: the events of this second are in
	since := now.Add(-deliveries.Horizon)                       // the failures that disable an endpoint last a horizon
	if e.DisabledAt != nil {
		since = e.DisabledAt.UTC().Add(-deliveries.Horizon).Truncate(time.Second)
	}
	return a.render(c, http.StatusOK, resendPage(c, e, since.Format(time.RFC3339), now.Format(time.RFC3339), "", a.Resend != nil))
}

func resendPage(c *gin.Context, e deliveries.EndpointSummary, since, until, errText string, available bool) templ.Component {
	state := "enabled"
	switch {
	case e.DeletedAt != nil:
		state = "deleted"
	case e.DisabledAt != nil:
		state = "disabled"
	}
	v := views.ConfirmView{
		Nav:   nav(c, "Webhooks"),
		Title: "Resend a window of webhooks",
		Subject: []views.Field{
			{Label: "Endpoint", Value: e.ID + " " + e.URL, Href: "/admin/webhooks/" + e.ID},
			field("Client", fmt.Sprintf("%s (%d)", e.ClientName, e.ClientID)),
			field("State", state),
		},
		Explain: []string{
			"Every event of the window (since included, until excluded, RFC 3339 times in UTC) that the endpoint is subscribed to and never received is sent within seconds, each under its own webhook-id, with a new retry schedule: events it was never sent because it was disabled, and deliveries that died. Those it received, or is still being retried, are left alone, so resending a window twice sends nothing twice.",
			"A disabled endpoint is enabled first. The window may reach back at most 30 days.",
		},
		Error:  errText,
		Action: resendHref(e.ID),
		Nonce:  randomToken(),
		Button: "Resend",
		Cancel: "/admin/webhooks/" + e.ID,
	}
	switch {
	case e.DeletedAt != nil:
		v.Refused = "The endpoint is deleted: nothing is sent to it."
	case !available:
		v.Refused = "This process has no job queue to send a resend with."
	}
	return views.ResendConfirmPage(v, since, until)
}

// resend enables the endpoint, queues the window's missed events and records it in the
// audit log, in one transaction; a form posted twice is audited and queued once (its
// nonce), and a second form for the same window queues nothing more (deliveries.Store.Resend).
func (a *console) resend(c *gin.Context) error {
	ctx := c.Request.Context()
	e, _, err := deliveries.ConsoleEndpoint(ctx, a.DB, c.Param("id"))
	if err != nil {
		return err
	}
	since, until := c.PostForm("since"), c.PostForm("until")
	nonce := c.PostForm("nonce")
	if !operator.ValidNonce(nonce) || a.Resend == nil || e.DeletedAt != nil {
		return a.render(c, http.StatusBadRequest, resendPage(c, e, since, until, "The form was incomplete; confirm again.", a.Resend != nil))
	}
	var w deliveries.Window
	var bad []string
	if w.Since, err = time.Parse(time.RFC3339, strings.TrimSpace(since)); err != nil {
		bad = append(bad, "since must be an RFC 3339 time, such as 2026-12-03T15:30:00Z")
	}
	if w.Until, err = time.Parse(time.RFC3339, strings.TrimSpace(until)); err != nil {
		bad = append(bad, "until must be an RFC 3339 time, such as 2026-12-03T15:30:00Z")
	}
	if len(bad) == 0 {
		var invalid deliveries.InvalidError
		if err := w.Validate(a.Now()); errors.As(err, &invalid) {
			for _, f := range invalid {
				bad = append(bad, f.Field+" "+f.Message)
			}
		}
	}
	if len(bad) > 0 {
		return a.render(c, http.StatusUnprocessableEntity, resendPage(c, e, since, until, strings.Join(bad, "; ")+".", true))
	}
	tx, err := a.DB.BeginTxx(db.Detach(ctx), nil)
	if err != nil {
		return fmt.Errorf("resend: %w", err)
	}
	defer tx.Rollback()
	recorded, err := RecordAuditOnce(ctx, tx, AuditRecord{At: a.Now(), OperatorID: session(c).Operator.ID,
		Action: ActionResendWebhookWindow, Target: "webhook_endpoint:" + e.ID, Nonce: nonce,
		Detail: map[string]any{"since": w.Since.UTC(), "until": w.Until.UTC(), "client_id": e.ClientID}})
	if err != nil {
		return err
	}
	done := "resend-queued-already"
	if recorded {
		res, err := a.Resend(ctx, tx, e.ClientID, e.ID, w)
		if err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("resend: %w", err)
		}
		a.Logger.Info("webhook window resent from the console", "endpoint", e.ID, "queued", res.Queued, "reenabled", res.Reenabled)
		done = "resend-queued"
	}
	c.Redirect(http.StatusSeeOther, "/admin/webhooks/"+e.ID+"?done="+done)
	return nil
}
