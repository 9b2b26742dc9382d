package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/operator"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// keyParams reads /keys/:client/:key and the key's details through q (the reader on the
// key's page, the primary for an action): checkout.ErrKeyNotFound (a 404) if there is no
// such key.
func (a *console) keyParams(c *gin.Context, q sqlx.QueryerContext) (report.KeyDetail, error) {
	clientID, err := strconv.ParseInt(c.Param("client"), 10, 64)
	if err != nil {
		return report.KeyDetail{}, checkout.ErrKeyNotFound
	}
	d, err := report.GetKey(c.Request.Context(), q, clientID, c.Param("key"))
	if err != nil {
		return report.KeyDetail{}, fmt.Errorf("key %d/%q: %w", clientID, c.Param("key"), err)
	}
	return d, nil
}

// keySubject is what a key action's confirmation page shows of the key.
func keySubject(d report.KeyDetail) []views.Field {
	fs := []views.Field{
		{Label: "Key", Value: d.Key, Href: keyHref(d.ClientID, d.Key)},
		field("Client", fmt.Sprintf("%s (%d)", d.ClientName, d.ClientID)),
		field("State", d.State),
		field("Request", d.Method+" "+d.Path),
		{Label: "First seen", At: d.CreatedAt},
		{Label: "Expires", At: d.ExpiresAt},
	}
	if d.AttentionReason != "" {
		fs = append(fs, field("Needs attention", d.AttentionReason))
	}
	if o := d.Order; o != nil {
		fs = append(fs, views.Field{Label: "Order", Value: fmt.Sprintf("%s (%s), %s", o.PublicID, o.Status,
			money.Format(o.Amount, o.Currency)), Href: orderHref(o.PublicID)})
	}
	return fs
}

func (a *console) releaseForm(c *gin.Context) error {
	d, err := a.keyParams(c, a.DB)
	if err != nil {
		return err
	}
	return a.render(c, http.StatusOK, releasePage(c, d, ""))
}

func releasePage(c *gin.Context, d report.KeyDetail, errText string) templ.Component {
	href := keyHref(d.ClientID, d.Key)
	what := "the order's charge"
	if d.RefundID != nil {
		what = "the refund"
	}
	v := views.ConfirmView{
		Nav:     nav(c, "Keys"),
		Title:   "Release key",
		Subject: keySubject(d),
		Explain: []string{
			"This key needs attention because the payment provider could not say, for too long, whether " + what + " happened. Until it is released, every retry with it is answered 503 needs_attention.",
			"Releasing asks the provider again, under the key's own provider key, and settles the key by its answer: a charge it has settles the order as paid (or declined); no charge cancels the order, and nothing was charged; a refund is finished. Nothing is ever charged by a release.",
			"If the provider still cannot answer, nothing changes and the key stays here.",
		},
		Error:  errText,
		Action: href + "/release",
		Nonce:  randomToken(),
		Button: "Release",
		Cancel: href,
	}
	if d.State != checkout.StateNeedsAttention {
		v.Refused = "This key does not need attention (it is " + d.State + "): there is nothing to release."
	}
	return views.ConfirmPage(v)
}

func (a *console) release(c *gin.Context) error {
	d, err := a.keyParams(c, a.DB)
	if err != nil {
		return err
	}
	nonce := c.PostForm("nonce")
	if !operator.ValidNonce(nonce) {
		return a.render(c, http.StatusBadRequest, releasePage(c, d, "The form was incomplete; confirm again."))
	}
	base := map[string]any{"client_id": d.ClientID, "key": d.Key}
	res, err := a.Operator.ReleaseKey(c.Request.Context(), d.ClientID, d.Key,
		a.recorder(c, ActionReleaseKey, keyTarget(d.ClientID, d.Key), nonce, base))
	if errors.Is(err, checkout.ErrKeyNotFound) {
		// Only its tombstone is left: a swept key never needed attention.
		res, err = operator.ActionResult{Outcome: operator.OutcomeNotNeeded, State: checkout.KeyStateExpired}, nil
	}
	if err != nil {
		return err
	}
	if !res.Done {
		a.Logger.Info("console release changed nothing", "client_id", d.ClientID, "key_id", d.ID,
			"outcome", res.Outcome, "detail", res.Detail)
	}
	c.Redirect(http.StatusSeeOther, keyHref(d.ClientID, d.Key)+"?done=release-"+res.Outcome)
	return nil
}

func (a *console) expireForm(c *gin.Context) error {
	d, err := a.keyParams(c, a.DB)
	if err != nil {
		return err
	}
	return a.render(c, http.StatusOK, expirePage(c, d, "", !checkout.KeyExpired(d.ExpiresAt, a.Now())))
}

func expirePage(c *gin.Context, d report.KeyDetail, errText string, live bool) templ.Component {
	href := keyHref(d.ClientID, d.Key)
	v := views.ConfirmView{
		Nav:     nav(c, "Keys"),
		Title:   "Force a key to expire",
		Subject: keySubject(d),
		Explain: []string{
			"The key expires now instead of at the time above. From then on a retry with it is no longer replayed: it is refused with 422 idempotency_key_expired, which tells the app that this purchase was made and must not be sent again under a new key.",
			"The sweeper removes the key on its next pass and keeps a tombstone that goes on refusing retries for the client's grace period. The order, its payment and its refunds do not change.",
			"Only a completed key can be expired. A key in progress is work in flight (a worker, a retry or the completer may be charging for it at this moment), and a key that needs attention has an outcome nobody knows yet: expiring either could refuse a retry while its payment is still being decided.",
		},
		Error:  errText,
		Action: href + "/expire",
		Nonce:  randomToken(),
		Button: "Expire now",
		Cancel: href,
	}
	switch {
	case d.State == checkout.KeyStateExpired || !live:
		v.Refused = "This key has expired already: there is nothing to do."
	case d.State != checkout.StateCompleted:
		v.Refused = "This key is " + d.State + ": only a completed key can be expired."
	}
	return views.ConfirmPage(v)
}

func (a *console) expire(c *gin.Context) error {
	d, err := a.keyParams(c, a.DB)
	if err != nil {
		return err
	}
	nonce := c.PostForm("nonce")
	live := !checkout.KeyExpired(d.ExpiresAt, a.Now())
	if !operator.ValidNonce(nonce) {
		return a.render(c, http.StatusBadRequest, expirePage(c, d, "The form was incomplete; confirm again.", live))
	}
	base := map[string]any{"client_id": d.ClientID, "key": d.Key}
	res, err := a.Operator.ExpireKey(c.Request.Context(), d.ClientID, d.Key,
		a.recorder(c, ActionExpireKey, keyTarget(d.ClientID, d.Key), nonce, base))
	switch {
	case errors.Is(err, operator.ErrKeyBusy):
		d.State = res.State
		return a.render(c, http.StatusConflict, expirePage(c, d, "Not expired: the key is "+res.State+", and only a completed key can be expired.", live))
	case err != nil:
		return err // checkout.ErrKeyNotFound (forgotten meanwhile): a 404
	}
	done := "expired"
	if !res.Done {
		done = "expire-" + res.Outcome
	}
	c.Redirect(http.StatusSeeOther, keyHref(d.ClientID, d.Key)+"?done="+done)
	return nil
}

// keyActions is what a key's page shows of actions: what an admin may do to the key, and
// the actions taken on the key and on its order (the one it made or refunds).
func (a *console) keyActions(c *gin.Context, d report.KeyDetail) (views.KeyActionsView, []views.AuditLine, error) {
	act := views.KeyActionsView{
		Href:       keyHref(d.ClientID, d.Key),
		CanRelease: d.State == checkout.StateNeedsAttention,
		CanExpire:  d.State == checkout.StateCompleted && !checkout.KeyExpired(d.ExpiresAt, a.Now()),
	}
	targets := []string{keyTarget(d.ClientID, d.Key)}
	if d.OrderPublicID != nil { // the order the key made or refunds
		targets = append(targets, orderTarget(*d.OrderPublicID))
	}
	rows, _, err := ListAudit(c.Request.Context(), a.DB, AuditFilter{Targets: targets}, report.Page{})
	if err != nil {
		return act, nil, err
	}
	return act, auditLines(rows), nil
}
