package admin

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// audit is the audit log page: every operator action, newest first, or those on one target
// (?target=order:42, ?target=key:1/abc).
func (a *console) audit(c *gin.Context) error {
	p := views.AuditPage{Nav: nav(c, "Audit"), Target: strings.TrimSpace(c.Query("target"))}
	var f AuditFilter
	if p.Target != "" {
		f.Targets = []string{p.Target}
	}
	rows, next, err := ListAudit(c.Request.Context(), a.DB, f, report.Page{After: c.Query("after")})
	if errors.Is(err, report.ErrInvalidQuery) {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.AuditList(p))
	}
	if err != nil {
		return err
	}
	p.Rows = auditLines(rows)
	p.Next = nextHref(c, "/admin/audit", "after", next)
	return a.render(c, http.StatusOK, views.AuditList(p))
}

// auditLines shows audit entries, each target a link to its page.
func auditLines(rows []AuditEntry) []views.AuditLine {
	out := make([]views.AuditLine, 0, len(rows))
	for _, r := range rows {
		out = append(out, views.AuditLine{At: r.At, Operator: r.OperatorEmail, Action: r.Action,
			Target: targetLink(r.Target), Detail: r.Detail})
	}
	return out
}

func targetLink(target string) views.Link {
	orderID, clientID, key, ok := parseTarget(target)
	switch {
	case strings.HasPrefix(target, "operator:"):
		return views.Link{Label: target, Href: "/admin/operators"}
	case strings.HasPrefix(target, "charge:"): // reconciliation's refund of an orphan charge
		return views.Link{Label: target, Href: "/admin/reconciliation"}
	case !ok:
		return views.Link{Label: target}
	case key != "":
		return views.Link{Label: key + " (client " + strconv.FormatInt(clientID, 10) + ")", Href: keyHref(clientID, key)}
	}
	return views.Link{Label: "order " + orderID, Href: orderHref(orderID)}
}
