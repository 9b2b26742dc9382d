package admin

// The CSV exports of the console's lists: each reads its page's filter form the page's way
// (a filter the page refuses is the same 400, before any byte of CSV), then every page of
// the list through the page's own query, MaxPageLimit rows at a time, writing each row as
// it is read. Times are RFC 3339 in UTC (their columns end in _utc), amounts integers in
// minor units beside their currency, ids the public ones, states as the pages word them.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// csvTime is a time as every export writes it: RFC 3339 in UTC, "" for none.
func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func csvTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return csvTime(*t)
}

func csvText(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func csvInt(n *int) string {
	if n == nil {
		return ""
	}
	return strconv.Itoa(*n)
}

// exportCSV streams a list's export (streamCSV); a filter the list's query refuses
// (report.ErrInvalidQuery, which it says on its first page, before any row) is the 400
// page with the words the list's page shows beside its form.
func exportCSV(c *gin.Context, filename string, header []string, each func(emit func([]string) error) error) error {
	var refused error
	err := streamCSV(c, filename, header, func(emit func([]string) error) error {
		err := each(emit)
		if errors.Is(err, report.ErrInvalidQuery) {
			refused = err
		}
		return err
	})
	if refused != nil && !c.Writer.Written() {
		return badRequest(refused.Error())
	}
	return err
}

var ordersHeader = []string{"order_id", "created_at_utc", "client_id", "client", "customer_id", "customer_email",
	"amount", "currency", "status", "payment", "charge_id", "card_brand", "card_last4", "decline_code",
	"refunded_amount", "refunds", "keys"}

// ordersCSV exports every order the orders search selects (the page's filters; the
// double-tap pairs above the list are not exported), newest first.
func (a *console) ordersCSV(c *gin.Context) error {
	ctx := c.Request.Context()
	of, _, err := a.orderFilter(orderForm(c), views.ZoneOf(ctx))
	if err != nil {
		return badRequest(err.Error())
	}
	list := func(ctx context.Context, p report.Page) ([]report.OrderRow, report.Page, error) {
		return report.FindOrders(ctx, a.Read, of, p)
	}
	return exportCSV(c, "orders.csv", ordersHeader, func(emit func([]string) error) error {
		return report.EachPage(ctx, list, func(rows []report.OrderRow) error {
			ids := make([]int64, len(rows))
			for i, o := range rows {
				ids[i] = o.ID
			}
			refunds, err := report.OrderRefunds(ctx, a.Read, ids)
			if err != nil {
				return err
			}
			for _, o := range rows {
				if err := emit(orderRecord(o, refunds[o.ID])); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func orderRecord(o report.OrderRow, refunds []report.RefundRow) []string {
	var payment, charge, brand, last4, decline string
	if p := o.Payment; p != nil {
		payment, charge, brand, last4, decline = p.Status, p.ChargeID, p.CardBrand, p.CardLast4, p.DeclineCode
	}
	rs := make([]string, len(refunds))
	for i, r := range refunds {
		rs[i] = r.PublicID + " " + strconv.FormatInt(r.Amount, 10) + " " + r.Currency + " " + r.Status
	}
	return []string{o.PublicID, csvTime(o.CreatedAt), itoa(o.ClientID), o.ClientName, o.CustomerID, o.CustomerEmail,
		itoa(o.Amount), o.Currency, o.Status, payment, charge, brand, last4, decline,
		itoa(o.RefundedAmount), strings.Join(rs, "; "), strings.Join(o.Keys, "; ")}
}

var keysHeader = []string{"client_id", "client", "key", "state", "method", "path", "order_id", "refund_key",
	"response_status", "replays", "created_at_utc", "expires_at_utc"}

// keysCSV exports every key the key list's filters select, newest first: each key's state
// and the status it answered, never its stored response.
func (a *console) keysCSV(c *gin.Context) error {
	ctx := c.Request.Context()
	kf, err := a.keyFilter(ctx, queryFilter(c), views.ZoneOf(ctx))
	if err != nil {
		return badRequest(err.Error())
	}
	list := func(ctx context.Context, p report.Page) ([]report.KeyRow, report.Page, error) {
		return report.ListKeys(ctx, a.Read, kf, p)
	}
	return exportCSV(c, "keys.csv", keysHeader, func(emit func([]string) error) error {
		return report.EachPage(ctx, list, func(rows []report.KeyRow) error {
			for _, r := range rows {
				refund := "no"
				if r.OrderPublicID != nil && r.OrderID == nil {
					refund = "yes"
				}
				if err := emit([]string{itoa(r.ClientID), r.ClientName, r.Key, r.State, r.Method, r.Path,
					csvText(r.OrderPublicID), refund, csvInt(r.ResponseStatus), itoa(r.Replays),
					csvTime(r.CreatedAt), csvTime(r.ExpiresAt)}); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

var historyHeader = []string{"at_utc", "kind", "client_id", "client", "key", "order_id", "request_id", "remote_addr",
	"user_agent", "status", "stored_fingerprint", "sent_fingerprint", "differs", "stored_request", "sent_request", "note"}

// conflictsCSV exports the conflicts page's list (its kind and filters).
func (a *console) conflictsCSV(c *gin.Context) error {
	kind := c.Query("kind")
	if kind == "" {
		kind = views.ConflictKinds[0] // as the page reads it
	}
	k, ok := conflictKinds[kind]
	if !ok {
		return badRequest("kind must be conflicts, in-flight or both")
	}
	return a.historyCSV(c, "conflicts.csv", k.kinds)
}

// replaysCSV exports the replays page's list: the same kind of list as the conflicts'.
func (a *console) replaysCSV(c *gin.Context) error {
	return a.historyCSV(c, "replays.csv", []string{checkout.KindReplayed})
}

// historyCSV exports the key history entries of kinds that the request's filter form
// selects, newest first, worded as historyLine words them on the page.
func (a *console) historyCSV(c *gin.Context, filename string, kinds []string) error {
	ctx := c.Request.Context()
	kf, err := a.keyFilter(ctx, historyFilterForm(c), views.ZoneOf(ctx))
	if err != nil {
		return badRequest(err.Error())
	}
	f := report.HistoryFilter{Kinds: kinds, ClientID: kf.ClientID, Key: kf.Key, CustomerID: kf.CustomerID,
		OrderID: kf.OrderID, From: kf.From, To: kf.To}
	list := func(ctx context.Context, p report.Page) ([]report.HistoryRow, report.Page, error) {
		return report.ListHistory(ctx, a.Read, f, p)
	}
	return exportCSV(c, filename, historyHeader, func(emit func([]string) error) error {
		return report.EachPage(ctx, list, func(rows []report.HistoryRow) error {
			for _, e := range rows {
				l := historyLine(e)
				if err := emit([]string{csvTime(e.At), e.Kind, itoa(e.ClientID), e.ClientName, e.Key,
					csvText(e.OrderPublicID), e.RequestID, e.RemoteAddr, e.UserAgent, l.Status, l.StoredFP, l.SentFP,
					strings.Join(l.Differs, "; "), l.StoredLine, l.SentLine, l.Note}); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

var deliveriesHeader = []string{"endpoint_id", "event_id", "event_type", "order_id", "state", "attempts", "created_at_utc",
	"last_attempt_at_utc", "last_outcome", "last_status", "next_attempt_at_utc", "finished_at_utc"}

// endpointDeliveriesCSV exports every delivery to a webhook endpoint, newest first: its
// page shows the latest, with their attempts; the file has one line per delivery, its state
// worded as the page words it and its last attempt's outcome.
func (a *console) endpointDeliveriesCSV(c *gin.Context) error {
	ctx := c.Request.Context()
	id := c.Param("id")
	if !deliveries.ValidEndpointID(id) {
		return deliveries.ErrEndpointNotFound
	}
	list := func(ctx context.Context, p report.Page) ([]report.EndpointDelivery, report.Page, error) {
		return report.EndpointDeliveries(ctx, a.Read, id, p)
	}
	return exportCSV(c, "deliveries-"+id+".csv", deliveriesHeader, func(emit func([]string) error) error {
		return report.EachPage(ctx, list, func(rows []report.EndpointDelivery) error {
			for _, d := range rows {
				last := lastOutcome(d.LastStatus, d.LastError)
				if d.Attempts == 0 {
					last = ""
				}
				if err := emit([]string{id, d.EventID, d.EventType, csvText(d.OrderPublicID), deliveryState(d.State, d.Attempts),
					strconv.Itoa(d.Attempts), csvTime(d.CreatedAt), csvTimePtr(d.LastAttemptAt), last, csvInt(d.LastStatus),
					csvTimePtr(d.NextAttemptAt), csvTimePtr(d.FinishedAt)}); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

var inboxHeader = []string{"received_at_utc", "provider", "event_id", "type", "charge_id", "order_id", "sequence", "outcome",
	"deliveries", "last_delivery_at_utc"}

// inboxCSV exports every provider event the inbox's filter selects (?q= its search, else
// ?charge=), newest first; the dead letters, a list of their own, are not in it.
func (a *console) inboxCSV(c *gin.Context) error {
	ctx := c.Request.Context()
	f := report.InboxFilter{Charge: strings.TrimSpace(c.Query("charge")), Query: strings.TrimSpace(c.Query("q"))}
	list := func(ctx context.Context, p report.Page) ([]report.InboxEvent, report.Page, error) {
		return report.InboxEvents(ctx, a.Read, f, p)
	}
	return exportCSV(c, "inbox.csv", inboxHeader, func(emit func([]string) error) error {
		return report.EachPage(ctx, list, func(rows []report.InboxEvent) error {
			for _, r := range rows {
				if err := emit([]string{csvTime(r.ReceivedAt), r.Provider, r.ID, r.Type, csvText(r.ChargeID),
					csvText(r.OrderPublicID), csvInt(r.Sequence), r.Outcome, strconv.Itoa(r.Deliveries),
					csvTime(r.LastDeliveryAt)}); err != nil {
					return err
				}
			}
			return nil
		})
	})
}
