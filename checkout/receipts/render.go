package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // a client's zone must load where the host has no zoneinfo

	"github.com/tekrar/tekrar/checkout/mailbox"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/views"
)

// receiptTime is how a receipt writes a time, before its zone's name.
const receiptTime = "2 January 2006 15:04"

// ClientZone is the zone a client's receipts write their times in: the client's own
// (clients.time_zone, the zone of its business days), UTC when it cannot be loaded.
func ClientZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil || name == "" || loc.String() == "Local" {
		return time.UTC
	}
	return loc
}

// receiptWhen writes t in loc with the zone named: "4 January 2027 12:30 Europe/Istanbul".
// The customer's own zone is unknown; the merchant's is the one its shop's clock shows.
func receiptWhen(t time.Time, loc *time.Location) string {
	return t.In(loc).Format(receiptTime) + " " + loc.String()
}

// compose fills the receipt's view from the order (and, for a refund, the refund; for an
// installment, the installment).
func compose(o orderFacts, rf *refundFacts, in *installmentFacts, messageID string) (views.ReceiptMail, error) {
	var items []struct {
		Name       string `json:"name"`
		Quantity   int64  `json:"quantity"`
		UnitAmount int64  `json:"unit_amount"`
	}
	if err := json.Unmarshal(o.Items, &items); err != nil {
		return views.ReceiptMail{}, fmt.Errorf("order %s items: %w: %w", o.PublicID, errUnusable, err)
	}
	m := views.ReceiptMail{Merchant: o.ClientName, OrderID: o.PublicID, Total: money.Format(o.Amount, o.Currency),
		MessageID: messageID}
	for _, it := range items {
		m.Items = append(m.Items, views.ReceiptItem{Name: oneLine(it.Name), Quantity: strconv.FormatInt(it.Quantity, 10),
			Amount: money.Format(it.Quantity*it.UnitAmount, o.Currency)})
	}
	if o.CardLast4 != "" {
		m.Card = o.CardBrand + " •••• " + o.CardLast4
	}
	loc := ClientZone(o.TimeZone)
	if o.PaidAt.Valid {
		m.When = receiptWhen(o.PaidAt.Time, loc)
	}
	if in != nil {
		// The card of a later installment is the customer's saved card as the provider held it
		// then, which tekrar does not record: no card rather than the first charge's.
		m.Installment = strconv.Itoa(in.N) + " of " + strconv.Itoa(in.Count)
		m.Paid, m.Card = money.Format(in.Amount, o.Currency), ""
		m.When = receiptWhen(in.PaidAt, loc)
	}
	if rf != nil {
		m.Refund, m.RefundID, m.Reason = true, rf.PublicID, oneLine(rf.Reason)
		m.Refunded = money.Format(rf.Amount, o.Currency)
		m.When = receiptWhen(rf.At, loc)
	}
	return m, nil
}

// oneLine is text the client wrote, for the message: the API refuses what mailbox.PlainText
// does not take, and a row stored before it did has its control characters, separators and
// bidirectional controls printed as spaces.
func oneLine(s string) string {
	if mailbox.PlainText(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if !mailbox.PlainText(string(r)) {
			return ' '
		}
		return r
	}, s)
}

// render writes the receipt's subject, text and HTML.
func render(ctx context.Context, m views.ReceiptMail) (subject, text, html string, _ error) {
	var b bytes.Buffer
	if err := views.ReceiptHTML(m).Render(ctx, &b); err != nil {
		return "", "", "", fmt.Errorf("render receipt: %w", err)
	}
	return views.ReceiptSubject(m), views.ReceiptText(m), b.String(), nil
}
