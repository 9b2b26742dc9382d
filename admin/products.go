package admin

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// productHref is a product's page: its client and its sku, escaped as a path segment.
func productHref(clientID int64, sku string) string {
	return "/admin/products/" + strconv.FormatInt(clientID, 10) + "/" + url.PathEscape(sku)
}

// products lists the clients' products with their stock levels (?client= narrows it).
func (a *console) products(c *gin.Context) error {
	var clientID int64
	if v := c.Query("client"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return badRequest("client must be a client id")
		}
		clientID = n
	}
	rows, err := report.Products(c.Request.Context(), a.Read, clientID)
	if err != nil {
		return err
	}
	p := views.ProductsPage{Nav: nav(c, "Products")}
	for _, r := range rows {
		p.Rows = append(p.Rows, views.ProductLine{Client: fmt.Sprintf("%s (%d)", r.ClientName, r.ClientID),
			SKU: r.SKU, Name: r.Name, Price: money.Format(r.Price, r.Currency), Stock: strconv.FormatInt(r.Stock, 10),
			Href: productHref(r.ClientID, r.SKU), Updated: r.UpdatedAt})
	}
	return a.render(c, http.StatusOK, views.Products(p))
}

// product is one product's page: its level and every movement of it, each linked to the
// order that caused it.
func (a *console) product(c *gin.Context) error {
	clientID, err := strconv.ParseInt(c.Param("client"), 10, 64)
	if err != nil {
		return notFound("There is no such product.")
	}
	sku := c.Param("sku")
	pr, ms, err := report.ProductMovements(c.Request.Context(), a.Read, clientID, sku)
	if errors.Is(err, report.ErrProductNotFound) {
		return notFound("There is no product " + sku + " for client " + strconv.FormatInt(clientID, 10) + ".")
	}
	if err != nil {
		return err
	}
	p := views.ProductPage{Nav: nav(c, "Products"), SKU: pr.SKU, Fields: []views.Field{
		field("Client", fmt.Sprintf("%s (%d)", pr.ClientName, pr.ClientID)),
		field("Name", pr.Name),
		field("Price", money.Format(pr.Price, pr.Currency)),
		field("Stock", strconv.FormatInt(pr.Stock, 10)),
		field("Version (ETag)", strconv.FormatInt(pr.Version, 10)),
		{Label: "Updated", At: pr.UpdatedAt},
	}}
	for _, m := range ms {
		l := views.MovementLine{At: m.At, Reason: m.Reason, Delta: fmt.Sprintf("%+d", m.Delta)}
		if m.OrderPublicID != nil {
			l.Order = views.Link{Label: *m.OrderPublicID, Href: orderHref(*m.OrderPublicID)}
		}
		if m.RefundPublicID != nil {
			l.Refund = *m.RefundPublicID
		}
		p.Movements = append(p.Movements, l)
	}
	return a.render(c, http.StatusOK, views.Product(p))
}
