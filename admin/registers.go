package admin

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// registerHref is a register's line on the registers page of its client.
func registerHref(clientID, registerID int64) string {
	return "/admin/registers?client=" + strconv.FormatInt(clientID, 10) + "#register-" + strconv.FormatInt(registerID, 10)
}

// oversoldHref is the page of a register's oversold sales.
func oversoldHref(registerID int64) string {
	return "/admin/registers/oversold?register=" + strconv.FormatInt(registerID, 10)
}

// oversoldSales lists the sales that sold beyond the stock (?register= narrows it to one
// register), each linking its order: a register's oversold count links here.
func (a *console) oversoldSales(c *gin.Context) error {
	var registerID int64
	if v := c.Query("register"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return badRequest("register must be a register's number, as the registers page links it")
		}
		registerID = n
	}
	sales, err := report.OversoldSales(c.Request.Context(), a.Read, registerID)
	if err != nil {
		return err
	}
	p := views.OversoldPage{Nav: nav(c, "Registers"), OneRegister: registerID != 0}
	for _, s := range sales {
		p.Rows = append(p.Rows, views.OversoldLine{Order: views.Link{Label: s.OrderPublicID, Href: orderHref(s.OrderPublicID)},
			Register: views.Link{Label: s.Register, Href: registerHref(s.ClientID, s.RegisterID)},
			Client:   fmt.Sprintf("%s (%d)", s.ClientName, s.ClientID), Key: s.Key, Status: s.Status,
			Amount: money.Format(s.Amount, s.Currency), Units: strconv.FormatInt(s.OversoldUnits, 10),
			SoldAt: s.SoldAt, Received: s.ReceivedAt})
	}
	return a.render(c, http.StatusOK, views.Oversold(p))
}

// registers lists the clients' registers with their resend statistics (?client= narrows it).
func (a *console) registers(c *gin.Context) error {
	var clientID int64
	if v := c.Query("client"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return badRequest("client must be a client id")
		}
		clientID = n
	}
	rows, err := report.Registers(c.Request.Context(), a.Read, clientID)
	if err != nil {
		return err
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	p := views.RegistersPage{Nav: nav(c, "Registers")}
	for _, r := range rows {
		l := views.RegisterLine{Anchor: "register-" + itoa(r.ID), Client: fmt.Sprintf("%s (%d)", r.ClientName, r.ClientID),
			ID: r.PublicID, Name: r.Name, Batches: itoa(r.Batches), Arrivals: itoa(r.Arrivals), Created: itoa(r.Created),
			Duplicates: itoa(r.Duplicates), Refused: itoa(r.Refused), Sales: itoa(r.Sales), Oversold: itoa(r.Oversold)}
		l.OversoldHref = oversoldHref(r.ID)
		if r.LastBatch != nil {
			l.LastBatch = *r.LastBatch
		}
		p.Rows = append(p.Rows, l)
	}
	return a.render(c, http.StatusOK, views.Registers(p))
}
