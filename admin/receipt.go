package admin

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/receipts"
	"github.com/tekrar/tekrar/views"
)

// receiptPreviewCSP is the policy of a receipt's HTML shown on its own: sandbox gives it an
// origin of its own, with no script, no forms, no plugins and no access to the console's
// cookies or pages; it may only use its inline styles.
const receiptPreviewCSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// receiptPage shows one receipt as stored: its headers, its text, and its HTML as source
// text. The HTML as a page is receiptPreview's.
func (a *console) receiptPage(c *gin.Context) error {
	r, err := a.loadReceipt(c)
	if err != nil {
		return err
	}
	return a.render(c, http.StatusOK, views.ReceiptDetail(views.ReceiptPage{Nav: nav(c, "Receipts"), Line: receiptLine(r),
		EventID: r.EventID, Subject: r.Subject, MessageID: r.MessageID, Text: r.BodyText, HTML: r.BodyHTML,
		PreviewHref: "/admin/receipts/" + url.PathEscape(r.EventID) + "/html", ClientZone: receipts.ClientZone(r.ClientTimeZone)}))
}

// receiptPreview serves a receipt's stored HTML, what the customer's mail client shows, as
// a document of its own under a sandboxing policy: it is never put inside a console page,
// where markup that reached it from an order (an item's name) could act as the operator.
func (a *console) receiptPreview(c *gin.Context) error {
	r, err := a.loadReceipt(c)
	if err != nil {
		return err
	}
	c.Writer.Header().Set("Content-Security-Policy", receiptPreviewCSP)
	return a.render(c, http.StatusOK, views.ReceiptPreview(r.BodyHTML))
}

func (a *console) loadReceipt(c *gin.Context) (receipts.Receipt, error) {
	r, err := receipts.Get(c.Request.Context(), a.DB, c.Param("event"))
	if errors.Is(err, receipts.ErrNotFound) {
		return r, notFound("There is no receipt for this event.")
	}
	return r, err
}
