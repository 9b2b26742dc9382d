package report

// The console's one search box: whatever an operator pastes (an order's or a refund's id, a
// key, a charge, a customer, a card's last four digits, an amount, a provider event) finds
// the orders it names. See report.go for the conventions: parameters only, and every kind's
// query reads an index (migration 00046 added the ones it lacked).

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/internal/pgtext"
)

// The kinds of thing the search box finds, in the order the results page shows them.
const (
	SearchOrder         = "order"          // ord_…, the order's public id
	SearchKey           = "key"            // an idempotency key of any client
	SearchRegisterSale  = "register sale"  // a register sale's key (its identity at the till)
	SearchCharge        = "charge"         // the provider's charge id, of an order or an installment
	SearchRefund        = "refund"         // rf_…, tekrar's, or the provider's refund id (re_…)
	SearchProviderEvent = "provider event" // evt_…, a provider event in the inbox
	SearchCustomer      = "customer"       // the start of an e-mail or customer id, any case
	SearchCard          = "card"           // a card's last four digits
	SearchAmount        = "amount"         // 12.50, 12.50 TRY, or 1250 (minor units)
)

// SearchKinds lists the kinds in the order the results page shows them.
var SearchKinds = []string{SearchOrder, SearchKey, SearchRegisterSale, SearchCharge, SearchRefund,
	SearchProviderEvent, SearchCustomer, SearchCard, SearchAmount}

// SearchLimit bounds each kind's matches; a kind with more says so (SearchGroup.More).
const SearchLimit = 50

// MaxSearchLength is the longest search that is looked for: no id tekrar keeps is longer
// (keys and provider ids are at most 255 characters, e-mails at most 320).
const MaxSearchLength = 512

// SearchHit is one thing that matched, and the order it belongs to.
type SearchHit struct {
	Kind  string
	Match string // what matched: the key, the charge id, the e-mail, ...
	Note  string // what else says which it is: a refund's amount, an event's type, an oversold sale
	// OrderPublicID is the order the hit belongs to; "" for a provider event of a charge of
	// no order (an orphan charge, an order still pending).
	OrderPublicID string
	ClientID      int64 // 0 when the hit has no order
	ClientName    string
	Status        string
	Amount        int64
	Currency      string
	At            time.Time // the order's creation, or a provider event's arrival
	// EventID is a provider event hit's id, which the inbox's search finds.
	EventID string
}

// SearchGroup is one kind's matches, newest first, at most SearchLimit; More says there are
// more than that.
type SearchGroup struct {
	Kind string
	Hits []SearchHit
	More bool
}

var (
	cardSyntax   = regexp.MustCompile(`^[0-9]{4}$`)
	amountSyntax = regexp.MustCompile(`^(?:([A-Za-z]{3})\s*)?([0-9]+(?:[.,][0-9]+)?)(?:\s*([A-Za-z]{3}))?$`)
)

// Search finds what q names. A query that says its kind searches that kind only: ord_ an
// order, rf_ and re_ a refund, ch_ a charge, evt_ a provider event, four digits a card's last
// four. Anything else is looked for as a key (a register sale's too), a charge, a provider
// refund, a provider event, the start of a customer's e-mail or id, and, when it reads as
// one, an amount: with a currency, as a receipt writes it (12.50 TRY); without, a decimal
// is read with 2 decimals and a whole number as minor units. Only the kinds that matched
// are returned, in SearchKinds' order. A query Postgres cannot hold as text, or longer than
// MaxSearchLength, matches nothing.
func Search(ctx context.Context, db sqlx.QueryerContext, q string) ([]SearchGroup, error) {
	q = strings.TrimSpace(q)
	if q == "" || len(q) > MaxSearchLength || !pgtext.Valid(q) {
		return nil, nil
	}
	var kinds []string
	switch {
	case strings.HasPrefix(q, "ord_"):
		kinds = []string{SearchOrder}
	case strings.HasPrefix(q, "rf_"), strings.HasPrefix(q, "re_"):
		kinds = []string{SearchRefund}
	case strings.HasPrefix(q, "ch_"):
		kinds = []string{SearchCharge}
	case strings.HasPrefix(q, "evt_"):
		kinds = []string{SearchProviderEvent}
	case cardSyntax.MatchString(q):
		kinds = []string{SearchCard}
	default:
		kinds = []string{SearchKey, SearchCharge, SearchRefund, SearchProviderEvent, SearchCustomer, SearchAmount}
	}
	var groups []SearchGroup
	for _, kind := range SearchKinds {
		if !contains(kinds, kind) && !(kind == SearchRegisterSale && contains(kinds, SearchKey)) {
			continue
		}
		hits, err := searchKind(ctx, db, kind, q)
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", kind, err)
		}
		if len(hits) == 0 {
			continue
		}
		g := SearchGroup{Kind: kind, Hits: hits}
		if len(hits) > SearchLimit {
			g.Hits, g.More = hits[:SearchLimit], true
		}
		groups = append(groups, g)
	}
	return groups, nil
}

func contains(kinds []string, kind string) bool {
	for _, k := range kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// searchHitSQL completes a kind's matches h (order_id, match, note, event_id, at: at most
// SearchLimit+1 rows, each read through an index) with their orders and clients.
const searchHitSQL = `
	SELECT h.match, h.note, coalesce(h.event_id, '') AS event_id,
	       coalesce(o.public_id::text, '') AS order_public_id, coalesce(o.client_id, 0) AS client_id,
	       coalesce(c.name, '') AS client_name, coalesce(o.status, '') AS status,
	       coalesce(o.amount, 0) AS amount, coalesce(o.currency, '') AS currency,
	       coalesce(o.created_at, h.at) AS at
	  FROM (%s) h
	  LEFT JOIN orders o ON o.id = h.order_id
	  LEFT JOIN clients c ON c.id = o.client_id
	 ORDER BY coalesce(o.created_at, h.at) DESC, h.match, o.id DESC`

type searchScan struct {
	Match         string    `db:"match"`
	Note          string    `db:"note"`
	EventID       string    `db:"event_id"`
	OrderPublicID string    `db:"order_public_id"`
	ClientID      int64     `db:"client_id"`
	ClientName    string    `db:"client_name"`
	Status        string    `db:"status"`
	Amount        int64     `db:"amount"`
	Currency      string    `db:"currency"`
	At            time.Time `db:"at"`
}

// likePrefix is a LIKE pattern of the strings that start with s: its own %, _ and \ match
// only themselves.
func likePrefix(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s) + "%"
}

// searchKind runs one kind's query; nil when q cannot be of that kind.
func searchKind(ctx context.Context, db sqlx.QueryerContext, kind, q string) ([]SearchHit, error) {
	var a sqlArgs
	limit := a.p(SearchLimit + 1)
	var inner string
	switch kind {
	case SearchOrder:
		if !checkout.ValidOrderID(q) {
			return nil, nil
		}
		inner = `SELECT o.id AS order_id, o.public_id::text AS match, '' AS note, NULL::text AS event_id, o.created_at AS at
		           FROM orders o WHERE o.public_id = ` + a.p(q) + ` LIMIT ` + limit
	case SearchKey, SearchRegisterSale:
		// A key of any client (the console is operators'), live or swept; a refund's key
		// belongs to its refund's order. A register sale is known by its key.
		sale := "NOT EXISTS"
		if kind == SearchRegisterSale {
			sale = "EXISTS"
		}
		p := a.p(q)
		inner = `SELECT k.order_id, k.key AS match,
		                coalesce((SELECT 'oversold ' || s.oversold_units || ' units at register ' || r.public_id
		                            FROM pos_sales s JOIN registers r ON r.id = s.register_id
		                           WHERE s.order_id = k.order_id AND s.oversold_units > 0),
		                         CASE WHEN k.refund THEN 'refund key' ELSE '' END) AS note,
		                NULL::text AS event_id, k.created_at AS at
		           FROM (SELECT coalesce(i.order_id, r.order_id) AS order_id, i.key, i.refund_id IS NOT NULL AS refund, i.created_at
		                   FROM idempotency_keys i LEFT JOIN refunds r ON r.id = i.refund_id
		                  WHERE i.client_id = ` + allClients + ` AND i.key = ` + p + `
		                 UNION
		                 SELECT coalesce(t.order_id, r.order_id), t.key, t.refund_id IS NOT NULL, t.first_seen
		                   FROM key_tombstones t LEFT JOIN refunds r ON r.id = t.refund_id
		                  WHERE t.client_id = ` + allClients + ` AND t.key = ` + p + `) k
		          WHERE k.order_id IS NOT NULL
		            AND ` + sale + ` (SELECT 1 FROM pos_sales s WHERE s.order_id = k.order_id)
		          LIMIT ` + limit
	case SearchCharge:
		p := a.p(q)
		inner = `SELECT p.order_id, p.provider_charge_id AS match, p.status AS note, NULL::text AS event_id, p.created_at AS at
		           FROM payments p WHERE p.provider_charge_id = ` + p + `
		         UNION ALL
		         SELECT i.order_id, i.provider_charge_id, 'installment ' || i.n || ' · ' || i.status, NULL, i.updated_at
		           FROM installments i WHERE i.provider_charge_id = ` + p + ` AND i.n > 1
		         LIMIT ` + limit
	case SearchRefund:
		// Only tekrar's and the provider's own ids reach this query: both are unique.
		col := "r.provider_refund_id"
		if strings.HasPrefix(q, "rf_") {
			col = "r.public_id::text"
		}
		inner = `SELECT r.order_id, ` + col + ` AS match,
		                'refund ' || r.public_id || coalesce(' (' || r.provider_refund_id || ')', '') || ' · ' || r.status AS note,
		                NULL::text AS event_id, r.created_at AS at
		           FROM refunds r WHERE ` + col + ` = ` + a.p(q) + ` LIMIT ` + limit
	case SearchProviderEvent:
		// The event's charge names its order as the inbox does: its payment, or a later
		// installment's charge.
		inner = `SELECT coalesce(p.order_id, i.order_id) AS order_id, e.event_id AS match,
		                e.type || ' · ' || e.outcome AS note, e.event_id, e.received_at AS at
		           FROM provider_events e
		           LEFT JOIN payments p ON p.provider_charge_id = e.charge_id
		           LEFT JOIN installments i ON i.provider_charge_id = e.charge_id AND i.n > 1
		          WHERE e.provider = ` + inboxProviders + ` AND e.event_id = ` + a.p(q) + ` LIMIT ` + limit
	case SearchCustomer:
		// Newest first within each index's prefix would sort every match: the first
		// SearchLimit+1 of each prefix range are enough to show and to say there are more.
		p := a.p(likePrefix(strings.ToLower(q)))
		inner = `SELECT o.id AS order_id, m.match, '' AS note, NULL::text AS event_id, o.created_at AS at
		           FROM (SELECT o.id, o.customer_email AS match FROM orders o
		                  WHERE lower(o.customer_email) LIKE ` + p + ` LIMIT ` + limit + `) m
		           JOIN orders o ON o.id = m.id
		         UNION
		         SELECT o.id, m.match, '', NULL, o.created_at
		           FROM (SELECT o.id, o.customer_id AS match FROM orders o
		                  WHERE lower(o.customer_id) LIKE ` + p + ` LIMIT ` + limit + `) m
		           JOIN orders o ON o.id = m.id
		         LIMIT ` + limit
	case SearchCard:
		inner = `SELECT p.order_id, p.card_last4 AS match, coalesce(p.card_brand, '') AS note, NULL::text AS event_id,
		                p.created_at AS at
		           FROM payments p WHERE p.card_last4 = ` + a.p(q) + ` LIMIT ` + limit
	case SearchAmount:
		amount, currency, ok := searchAmount(q)
		if !ok {
			return nil, nil
		}
		cur := ""
		if currency != "" {
			cur = ` AND o.currency = ` + a.p(currency)
		}
		// Each client's own (client_id, amount, created_at, id) range, newest first, merged.
		inner = `SELECT o.id AS order_id, o.currency AS match, '' AS note, NULL::text AS event_id, o.created_at AS at
		           FROM clients c CROSS JOIN LATERAL (
		                SELECT o.id, o.currency, o.created_at FROM orders o
		                 WHERE o.client_id = c.id AND o.amount = ` + a.p(amount) + cur + `
		                 ORDER BY o.created_at DESC, o.id DESC LIMIT ` + limit + `) o
		          ORDER BY o.created_at DESC, o.id DESC LIMIT ` + limit
	default:
		return nil, invalidQuery("unknown search kind %q", kind)
	}
	var rows []searchScan
	if err := sqlx.SelectContext(ctx, db, &rows, fmt.Sprintf(searchHitSQL, inner), a...); err != nil {
		return nil, err
	}
	hits := make([]SearchHit, len(rows))
	for i, r := range rows {
		hits[i] = SearchHit{Kind: kind, Match: r.Match, Note: r.Note, OrderPublicID: r.OrderPublicID,
			ClientID: r.ClientID, ClientName: r.ClientName, Status: r.Status, Amount: r.Amount,
			Currency: r.Currency, At: r.At.UTC(), EventID: r.EventID}
		if kind == SearchAmount {
			hits[i].Match = money.Format(r.Amount, r.Currency)
		}
	}
	return hits, nil
}

// searchAmount reads q as an amount: with a currency (before or after it) as a receipt
// writes it, in the currency's units; without one, a decimal with 2 decimals and a whole
// number as minor units. ok is false when q is not an amount.
func searchAmount(q string) (amount int64, currency string, ok bool) {
	m := amountSyntax.FindStringSubmatch(q)
	if m == nil || (m[1] != "" && m[3] != "") {
		return 0, "", false
	}
	currency = strings.ToUpper(m[1] + m[3])
	if currency != "" && !money.ValidCurrency(currency) {
		return 0, "", false
	}
	num := m[2]
	if currency == "" && !strings.ContainsAny(num, ".,") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n <= 0 || n > money.MaxAmount {
			return 0, "", false
		}
		return n, "", true
	}
	v, err := money.Parse(num, currency)
	if err != nil {
		return 0, "", false
	}
	return v, currency, true
}
