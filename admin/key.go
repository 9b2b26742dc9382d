package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// key is one key's page: what arrived with it and what each request was answered, the
// order it made, its stored response, and what an admin may do to it.
func (a *console) key(c *gin.Context) error {
	d, err := a.keyParams(c, a.Read)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	history, err := report.KeyTimeline(ctx, a.Read, d.ClientID, d.Key)
	if err != nil {
		return err
	}
	v := views.KeyDetail{Nav: nav(c, "Keys"), Key: d.Key, State: d.State}
	v.Fields = []views.Field{
		field("Client", fmt.Sprintf("%s (%d)", d.ClientName, d.ClientID)),
		field("Request", d.Method+" "+d.Path),
		field("Fingerprint", d.Fingerprint),
		field("Recovery point", d.RecoveryPoint),
		{Label: "First seen", At: d.CreatedAt},
		{Label: "Expires", At: d.ExpiresAt},
		field("Replays", strconv.FormatInt(d.Replays, 10)),
	}
	if d.AttentionReason != "" {
		v.Fields = append(v.Fields, field("Needs attention", d.AttentionReason))
	}
	if d.Tombstone != nil {
		v.Fields = append(v.Fields, views.Field{Label: "Refused until", At: d.Tombstone.ForgetAt})
	}
	if o := d.Order; o != nil {
		v.Order = []views.Field{
			{Label: "Order", Value: fmt.Sprintf("%s (%s)", o.PublicID, o.Status), Href: orderHref(o.PublicID)},
			field("Amount", fmt.Sprintf("%s (refunded %s)", money.Format(o.Amount, o.Currency), money.Format(o.RefundedAmount, o.Currency))),
			field("Customer", o.CustomerID+" "+o.CustomerEmail),
			field("Items", string(o.Items)),
		}
		if p := o.Payment; p != nil {
			v.Order = append(v.Order, field("Charge", fmt.Sprintf("%s %s %s ••%s %s", p.ChargeID, p.Status, p.CardBrand, p.CardLast4, p.DeclineCode)))
		}
		// What the provider reported against the order's charge, linked to its row in the
		// disputes queue or the compensations list.
		disputes, comp, err := report.OrderCases(ctx, a.Read, o.ID)
		if err != nil {
			return err
		}
		for _, dp := range disputes {
			v.Order = append(v.Order, views.Field{Label: "Dispute",
				Value: fmt.Sprintf("%s %s: %s (%s)", dp.DisputeID, dp.Status, money.Format(dp.Amount, o.Currency), dp.Reason),
				Href:  disputesHref(o.PublicID, dp.DisputeID)})
		}
		if comp != nil {
			v.Order = append(v.Order, views.Field{Label: "Compensation", Value: statusWords(comp.State) + ": " + comp.Reason,
				Href: compensationHref(o.PublicID, comp.ID)})
		}
	}
	for _, r := range d.Refunds {
		v.Refunds = append(v.Refunds, []views.Field{
			field("Refund", fmt.Sprintf("%s (%s)", r.PublicID, r.Status)),
			field("Amount", fmt.Sprintf("%d %s", r.Amount, r.Currency)),
			field("Reason", r.Reason),
			field("Key", r.Key),
		})
	}
	if len(d.ResponseBody) > 0 {
		var pretty bytes.Buffer
		if json.Indent(&pretty, d.ResponseBody, "", "  ") == nil {
			v.Response = pretty.String()
		} else {
			v.Response = string(d.ResponseBody)
		}
	}
	v.Timeline = timelineEntries(history)
	if v.Actions, v.Audit, err = a.keyActions(c, d); err != nil {
		return err
	}
	return a.render(c, http.StatusOK, views.KeyPage(v))
}

// timelineEntries shows a key's history: who sent each request, and what it was answered.
func timelineEntries(history []report.HistoryRow) []views.TimelineEntry {
	var out []views.TimelineEntry
	for _, e := range history {
		t := views.TimelineEntry{At: e.At, Kind: e.Kind, Request: e.RequestID, Address: e.RemoteAddr, Device: e.UserAgent, Detail: string(e.Detail)}
		if e.Status != nil {
			t.Status = strconv.Itoa(*e.Status)
		}
		if e.Fingerprint != "" {
			t.Detail += " fingerprint " + e.Fingerprint
		}
		out = append(out, t)
	}
	return out
}

func field(label, value string) views.Field { return views.Field{Label: label, Value: value} }
