package admin

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/operator"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/views"
)

// ActionEndSessions is an admin signing an operator out everywhere.
const ActionEndSessions = "end_sessions"

// operatorTarget names the operator an action acted on, in the audit log.
func operatorTarget(id int64) string { return "operator:" + strconv.FormatInt(id, 10) }

func endSessionsHref(id int64) string {
	return "/admin/operators/" + strconv.FormatInt(id, 10) + "/end-sessions"
}

// operators lists the operators and their open sessions, for admins.
func (a *console) operators(c *gin.Context) error {
	rows, err := ListOperators(c.Request.Context(), a.DB, a.Now())
	if err != nil {
		return err
	}
	p := views.OperatorsPage{Nav: nav(c, "Operators")}
	for _, r := range rows {
		line := views.OperatorLine{Email: r.Email, Role: r.Role, Sessions: r.Sessions, EndHref: endSessionsHref(r.ID)}
		if r.LastSignIn != nil {
			line.LastSignIn = r.LastSignIn.UTC()
		}
		p.Rows = append(p.Rows, line)
	}
	return a.render(c, http.StatusOK, views.OperatorsList(p))
}

// operatorParam reads /operators/:id and the operator: ErrNoOperator (a 404) if there is
// none.
func (a *console) operatorParam(c *gin.Context) (OperatorRow, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return OperatorRow{}, ErrNoOperator
	}
	return GetOperator(c.Request.Context(), a.DB, id, a.Now())
}

func (a *console) endSessionsForm(c *gin.Context) error {
	op, err := a.operatorParam(c)
	if err != nil {
		return err
	}
	return a.render(c, http.StatusOK, endSessionsPage(c, op, ""))
}

func endSessionsPage(c *gin.Context, op OperatorRow, errText string) templ.Component {
	fs := []views.Field{field("Operator", op.Email), field("Role", op.Role),
		field("Open sessions", strconv.Itoa(op.Sessions))}
	if op.LastSignIn != nil {
		fs = append(fs, views.Field{Label: "Last sign-in", At: op.LastSignIn.UTC()})
	}
	explain := []string{
		"Every session of this operator ends now, on every device: their next page asks them to sign in again, with their password.",
		"Use it when a device or a password may be in someone else's hands. If the password may be known, also reset it (tekrar operators create), which ends their sessions too.",
	}
	if op.ID == session(c).Operator.ID {
		explain = append(explain, "This is you: this session ends too.")
	}
	return views.ConfirmPage(views.ConfirmView{
		Nav: nav(c, "Operators"), Title: "End sessions", Subject: fs, Explain: explain, Error: errText,
		Action: endSessionsHref(op.ID), Nonce: randomToken(), Button: "End sessions", Cancel: "/admin/operators",
	})
}

// endSessions ends an operator's sessions and records it, in one transaction. The form's
// nonce makes it act once: posted again (a double click, or later, after the operator has
// signed in again), it ends nothing more.
func (a *console) endSessions(c *gin.Context) error {
	op, err := a.operatorParam(c)
	if err != nil {
		return err
	}
	nonce := c.PostForm("nonce")
	if !operator.ValidNonce(nonce) {
		return a.render(c, http.StatusBadRequest, endSessionsPage(c, op, "The form was incomplete; confirm again."))
	}
	ctx := c.Request.Context()
	tx, err := a.DB.BeginTxx(db.Detach(ctx), nil)
	if err != nil {
		return fmt.Errorf("end sessions: %w", err)
	}
	defer tx.Rollback()
	n, err := EndSessions(ctx, tx, op.ID)
	if err != nil {
		return err
	}
	recorded, err := RecordAuditOnce(ctx, tx, AuditRecord{At: a.Now(), OperatorID: session(c).Operator.ID,
		Action: ActionEndSessions, Target: operatorTarget(op.ID), Nonce: nonce,
		Detail: map[string]any{"operator_id": op.ID, "email": op.Email, "sessions": n}})
	if err != nil {
		return err
	}
	done := "sessions-ended-already"
	if recorded {
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("end sessions: %w", err)
		}
		done = "sessions-ended"
	}
	c.Redirect(http.StatusSeeOther, "/admin/operators?done="+done)
	return nil
}
