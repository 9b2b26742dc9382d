package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/inbox"
	"github.com/tekrar/tekrar/checkout/operator"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// The inbox's dead letters (checkout/deadletters.go): signed provider events tekrar could
// not store as they were, kept raw. They are listed on the inbox page (?view=dead lists
// only them) and an admin replays one once tekrar can take it: the replay decodes and
// applies it as a delivery would be, and is recorded in the audit log.

// ActionReplayDeadLetter is a dead letter's replay in the audit log.
const ActionReplayDeadLetter = "replay_dead_letter"

func deadLetterTarget(id int64) string { return "provider_dead_letter:" + strconv.FormatInt(id, 10) }

func replayHref(id int64) string {
	return "/admin/inbox/dead/" + strconv.FormatInt(id, 10) + "/replay"
}

// deadLetterLines are the console's lines of ds; an admin's waiting ones have a replay link.
func deadLetterLines(c *gin.Context, ds []report.InboxDeadLetter) []views.InboxDeadLine {
	canAct := session(c).Operator.CanAct()
	out := make([]views.InboxDeadLine, 0, len(ds))
	for _, d := range ds {
		l := views.InboxDeadLine{WebhookID: d.WebhookID, Reason: d.Reason, Detail: d.Detail, State: d.State,
			Size: d.Size, Deliveries: d.Deliveries, Received: d.ReceivedAt, Last: d.LastDeliveryAt}
		if d.ReplayOutcome != nil {
			l.State += " (" + *d.ReplayOutcome + ")"
		}
		if canAct && d.State == "dead" {
			l.ReplayHref = replayHref(d.ID)
		}
		out = append(out, l)
	}
	return out
}

func (a *console) deadLetterParam(c *gin.Context) (report.InboxDeadLetter, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return report.InboxDeadLetter{}, inbox.ErrDeadLetterNotFound
	}
	d, ok, err := report.DeadLetter(c.Request.Context(), a.DB, id)
	if err == nil && !ok {
		err = inbox.ErrDeadLetterNotFound
	}
	return d, err
}

func (a *console) replayForm(c *gin.Context) error {
	d, err := a.deadLetterParam(c)
	if err != nil {
		return err
	}
	return a.render(c, http.StatusOK, replayPage(c, d, ""))
}

func replayPage(c *gin.Context, d report.InboxDeadLetter, errText string) templ.Component {
	v := views.ConfirmView{
		Nav:   nav(c, "Inbox"),
		Title: "Replay a dead letter",
		Subject: []views.Field{
			field("Event (webhook-id)", d.WebhookID),
			field("Why it was kept", d.Reason+": "+d.Detail),
			field("Body", strconv.Itoa(d.Size)+" bytes, as received"),
			field("Deliveries", strconv.Itoa(d.Deliveries)),
			field("State", d.State),
		},
		Explain: []string{
			"The body kept is read again and applied as the provider's delivery would be: recorded once in the inbox, in its charge's order, with its effect on the order.",
			"If tekrar still cannot take it, nothing changes and the reason is shown here; replay it again once tekrar is fixed.",
		},
		Error:  errText,
		Action: replayHref(d.ID),
		Nonce:  randomToken(),
		Button: "Replay",
		Cancel: "/admin/inbox?view=dead",
	}
	if d.State != "dead" {
		v.Refused = "This dead letter was replayed already."
	}
	return views.ConfirmPage(v)
}

// replay applies the dead letter (the service's own transaction, idempotent by itself: a
// replayed dead letter is not replayed again) and records it in the audit log once per
// form.
func (a *console) replay(c *gin.Context) error {
	d, err := a.deadLetterParam(c)
	if err != nil {
		return err
	}
	nonce := c.PostForm("nonce")
	if !operator.ValidNonce(nonce) {
		return a.render(c, http.StatusBadRequest, replayPage(c, d, "The form was incomplete; confirm again."))
	}
	ctx := c.Request.Context()
	outcome, err := a.Inbox.ReplayDeadLetter(ctx, d.ID)
	var u *inbox.UnstorableEventError
	switch {
	case errors.Is(err, inbox.ErrDeadLetterReplayed):
		c.Redirect(http.StatusSeeOther, "/admin/inbox?view=dead")
		return nil
	case errors.As(err, &u):
		return a.render(c, http.StatusUnprocessableEntity, replayPage(c, d, "tekrar still cannot take it: "+u.Error()))
	case err != nil:
		return fmt.Errorf("replay dead letter %d: %w", d.ID, err)
	}
	if _, err := RecordAuditOnce(ctx, a.DB, AuditRecord{At: a.Now(), OperatorID: session(c).Operator.ID,
		Action: ActionReplayDeadLetter, Target: deadLetterTarget(d.ID), Nonce: nonce,
		Detail: map[string]any{"webhook_id": d.WebhookID, "reason": d.Reason, "outcome": outcome}}); err != nil {
		return err
	}
	c.Redirect(http.StatusSeeOther, "/admin/inbox?view=dead")
	return nil
}
