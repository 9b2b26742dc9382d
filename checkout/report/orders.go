package report

// The console's searches of orders: the complaint search and the suspected double taps.
// See report.go for the conventions (parameters only, index-backed, no whole scans).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout"
)

// OrderFilter selects orders; every field is optional and they combine with AND.
type OrderFilter struct {
	ClientID      int64
	CustomerID    string
	CustomerEmail string // exact, case-insensitive
	CardLast4     string
	Amount        int64 // minor units
	From, To      time.Time
}

// OrderRow is an order with its payment, what was refunded, and the keys that created it.
type OrderRow struct {
	ID             int64  // internal: joins only, never shown
	PublicID       string // what the console shows and links by
	ClientID       int64
	ClientName     string
	Status         string
	Amount         int64
	Currency       string
	Items          json.RawMessage
	CustomerID     string
	CustomerEmail  string
	RefundedAmount int64 // refunded or being refunded
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Payment        *PaymentRow // nil until the provider answered
	// Keys are the idempotency keys that created the order: the live key row and, once
	// swept, its tombstone (the same key); empty once forgotten.
	Keys []string
}

// PaymentRow is an order's provider charge.
type PaymentRow struct {
	ChargeID    string
	Status      string // succeeded or declined
	DeclineCode string
	CardBrand   string
	CardLast4   string
	CreatedAt   time.Time
}

type orderScan struct {
	ID             int64          `db:"id"`
	PublicID       string         `db:"public_id"`
	ClientID       int64          `db:"client_id"`
	ClientName     string         `db:"client_name"`
	Status         string         `db:"status"`
	Amount         int64          `db:"amount"`
	Currency       string         `db:"currency"`
	Items          string         `db:"items"`
	CustomerID     string         `db:"customer_id"`
	CustomerEmail  string         `db:"customer_email"`
	RefundedAmount int64          `db:"refunded_amount"`
	CreatedAt      time.Time      `db:"created_at"`
	UpdatedAt      time.Time      `db:"updated_at"`
	ChargeID       sql.NullString `db:"provider_charge_id"`
	PayStatus      sql.NullString `db:"pay_status"`
	DeclineCode    sql.NullString `db:"decline_code"`
	CardBrand      sql.NullString `db:"card_brand"`
	CardLast4      sql.NullString `db:"card_last4"`
	PaidAt         sql.NullTime   `db:"paid_at"`
	Keys           pq.StringArray `db:"keys"`
}

func (s *orderScan) row() OrderRow {
	r := OrderRow{ID: s.ID, PublicID: s.PublicID, ClientID: s.ClientID, ClientName: s.ClientName, Status: s.Status,
		Amount: s.Amount, Currency: s.Currency, Items: json.RawMessage(s.Items), CustomerID: s.CustomerID,
		CustomerEmail: s.CustomerEmail, RefundedAmount: s.RefundedAmount, CreatedAt: s.CreatedAt.UTC(),
		UpdatedAt: s.UpdatedAt.UTC(), Keys: []string(s.Keys)}
	if s.ChargeID.Valid {
		r.Payment = &PaymentRow{ChargeID: s.ChargeID.String, Status: s.PayStatus.String,
			DeclineCode: s.DeclineCode.String, CardBrand: s.CardBrand.String, CardLast4: s.CardLast4.String,
			CreatedAt: s.PaidAt.Time.UTC()}
	}
	if r.Keys == nil {
		r.Keys = []string{}
	}
	return r
}

const orderPageColumns = `o.id, o.public_id, o.client_id, o.status, o.amount, o.currency, o.items, o.customer_id,
	       o.customer_email, o.refunded_amount, o.created_at, o.updated_at`

// orderRowsSQL completes a page of orders (the subquery o) with client, payment and keys,
// for the rows of the page only.
const orderRowsSQL = `
	SELECT o.id, o.public_id, o.client_id, c.name AS client_name, o.status, o.amount, o.currency,
	       o.items::text AS items, coalesce(o.customer_id, '') AS customer_id,
	       coalesce(o.customer_email, '') AS customer_email, o.refunded_amount, o.created_at,
	       o.updated_at, p.provider_charge_id, p.status AS pay_status, p.decline_code,
	       p.card_brand, p.card_last4, p.created_at AS paid_at,
	       ARRAY(SELECT k.key FROM idempotency_keys k WHERE k.order_id = o.id
	             UNION
	             SELECT t.key FROM key_tombstones t WHERE t.order_id = o.id) AS keys
	  FROM (%s) o
	  JOIN clients c ON c.id = o.client_id
	  LEFT JOIN payments p ON p.order_id = o.id
	 ORDER BY o.created_at DESC, o.id DESC`

func selectOrders(ctx context.Context, db sqlx.QueryerContext, q string, a []any) ([]OrderRow, error) {
	var rows []orderScan
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, err
	}
	out := make([]OrderRow, len(rows))
	for i := range rows {
		out[i] = rows[i].row()
	}
	return out, nil
}

func loadOrderRows(ctx context.Context, db sqlx.QueryerContext, ids []int64) ([]OrderRow, error) {
	q := fmt.Sprintf(orderRowsSQL, `SELECT `+orderPageColumns+` FROM orders o WHERE o.id = ANY ($1::bigint[])`)
	rows, err := selectOrders(ctx, db, q, []any{pq.Array(ids)})
	if err != nil {
		return nil, fmt.Errorf("load orders: %w", err)
	}
	return rows, nil
}

// orderPreds returns the predicates of f on orders o (and payments p when the filter needs
// them: join reports it) and whether they include a selective one.
func orderPreds(a *sqlArgs, f OrderFilter) (preds []string, join, selective bool) {
	if f.ClientID != 0 {
		preds = append(preds, "o.client_id = "+a.p(f.ClientID))
	}
	if f.CustomerID != "" {
		if f.ClientID == 0 {
			preds = append(preds, "o.client_id = "+allClients)
		}
		preds = append(preds, "o.customer_id = "+a.p(f.CustomerID))
	}
	if f.CustomerEmail != "" {
		preds = append(preds, "lower(o.customer_email) = lower("+a.p(f.CustomerEmail)+"::text)")
	}
	if f.Amount != 0 {
		if f.ClientID == 0 && f.CustomerID == "" {
			preds = append(preds, "o.client_id = "+allClients)
		}
		preds = append(preds, "o.amount = "+a.p(f.Amount))
	}
	if f.CardLast4 != "" {
		preds = append(preds, "p.card_last4 = "+a.p(f.CardLast4))
		join = true
	}
	if !f.From.IsZero() {
		preds = append(preds, "o.created_at >= "+a.t(f.From))
	}
	if !f.To.IsZero() {
		preds = append(preds, "o.created_at < "+a.t(f.To))
	}
	selective = f.ClientID != 0 || f.CustomerID != "" || f.CustomerEmail != "" || f.CardLast4 != "" || f.Amount != 0
	return preds, join, selective
}

func findOrdersSQL(f OrderFilter, page Page) (string, []any, error) {
	cur, err := page.decode()
	if err != nil {
		return "", nil, err
	}
	var a sqlArgs
	preds, join, selective := orderPreds(&a, f)
	if cur != nil {
		preds = append(preds, "(o.created_at, o.id) < ("+a.p(cur.at)+"::timestamptz, "+a.p(cur.id)+"::bigint)")
	}
	from := ` FROM orders o`
	if join {
		from += ` JOIN payments p ON p.order_id = o.id`
	}
	limit := a.p(page.size() + 1)
	var inner string
	if selective {
		inner = `SELECT ` + orderPageColumns + from + sqlWhere(preds) +
			` ORDER BY o.created_at DESC, o.id DESC LIMIT ` + limit
	} else {
		// No filter narrows it down: merge the clients' newest orders (orders_client_created_idx).
		inner = `SELECT o.* FROM clients c CROSS JOIN LATERAL (
			SELECT ` + orderPageColumns + from + sqlWhere(append([]string{"o.client_id = c.id"}, preds...)) + `
			 ORDER BY o.created_at DESC, o.id DESC LIMIT ` + limit + `) o
			 ORDER BY o.created_at DESC, o.id DESC LIMIT ` + limit
	}
	return fmt.Sprintf(orderRowsSQL, inner), a, nil
}

// FindOrders returns a page of orders matching f, newest first, for the complaint search.
func FindOrders(ctx context.Context, db sqlx.QueryerContext, f OrderFilter, page Page) ([]OrderRow, Page, error) {
	q, a, err := findOrdersSQL(f, page)
	if err != nil {
		return nil, Page{}, err
	}
	rows, err := selectOrders(ctx, db, q, a)
	if err != nil {
		return nil, Page{}, fmt.Errorf("find orders: %w", err)
	}
	n := page.size()
	nx := nextPage(n, len(rows), func() pageCursor { return pageCursor{at: rows[n-1].CreatedAt, id: rows[n-1].ID} })
	if len(rows) > n {
		rows = rows[:n]
	}
	return rows, nx, nil
}

// DoubleTap is a group of charged orders that look like one purchase charged again and
// again: the same client, the same customer (id, or email regardless of case), the same
// amount, currency and items, paid with the same card (brand and last 4), each under its
// own idempotency key and each at most the window after another of the group. Three taps
// are one group of three, not two pairs.
type DoubleTap struct {
	Orders []OrderRow    // oldest first; two or more
	Gap    time.Duration // from the first order to the last
}

// MaxDoubleTapWindow bounds SuspectedDoubleTaps' window.
const MaxDoubleTapWindow = 24 * time.Hour

// doubleTapsSQL finds the pairs: the filter picks the first order of each pair, and each
// first order probes orders_client_amount_idx (client_id, amount, created_at) for the few
// orders of the same amount in the window after it. Pairs are found once: the second is
// after the first in (created_at, id) order.
func doubleTapsSQL(f OrderFilter, window time.Duration) (string, []any, error) {
	if window <= 0 || window > MaxDoubleTapWindow {
		return "", nil, invalidQuery("the window must be positive and at most %s", MaxDoubleTapWindow)
	}
	if (f.From.IsZero() || f.To.IsZero()) && f.CustomerID == "" && f.CustomerEmail == "" {
		return "", nil, invalidQuery("a double-tap search needs a time range or a customer")
	}
	var a sqlArgs
	preds, _, _ := orderPreds(&a, f) // payments p is joined anyway
	if f.ClientID == 0 && f.CustomerID == "" && f.Amount == 0 && f.CustomerEmail == "" && f.CardLast4 == "" {
		// Only a time range: read orders_client_created_idx once per client.
		preds = append(preds, "o.client_id = "+allClients)
	}
	// The card is compared, so the first order's payment is always read (by its key).
	from := ` FROM orders o JOIN payments p ON p.order_id = o.id`
	w := a.p(window.Microseconds())
	// The partners of an order are read from orders_client_amount_idx: same client and
	// amount, in the window after it. OFFSET 0 keeps the subquery a probe per first order
	// (a plain one would be pulled up into a join, free to hash all orders) and keeps the
	// customer comparison out of it: inside, the planner may probe the customer's indexes
	// instead, which reads a regular customer's whole history for every order.
	q := `
		SELECT o.id AS first_id, o2.id AS second_id` + from + `
		 CROSS JOIN LATERAL (
		       SELECT o2.id, o2.created_at, o2.customer_id, o2.customer_email,
		              p2.card_brand, p2.card_last4
		         FROM orders o2 JOIN payments p2 ON p2.order_id = o2.id
		        WHERE o2.client_id = o.client_id AND o2.amount = o.amount AND o2.currency = o.currency
		          AND o2.created_at >= o.created_at
		          AND o2.created_at <= o.created_at + ` + w + `::bigint * interval '1 microsecond'
		          AND (o2.created_at, o2.id) > (o.created_at, o.id)
		          AND o2.status IN ` + checkout.ChargedStatuses.SQL() + ` AND o2.items = o.items
		       OFFSET 0
		       ) o2` + sqlWhere(append(preds, "o.status IN "+checkout.ChargedStatuses.SQL(),
		"(o2.customer_id = o.customer_id OR lower(o2.customer_email) = lower(o.customer_email))",
		// Two cards are two payments the customer chose to make, not one tapped twice.
		"o2.card_brand IS NOT DISTINCT FROM p.card_brand AND o2.card_last4 IS NOT DISTINCT FROM p.card_last4",
		`NOT (ARRAY(SELECT k.key FROM idempotency_keys k WHERE k.order_id = o.id
		             UNION ALL SELECT t.key FROM key_tombstones t WHERE t.order_id = o.id)
		      && ARRAY(SELECT k.key FROM idempotency_keys k WHERE k.order_id = o2.id
		             UNION ALL SELECT t.key FROM key_tombstones t WHERE t.order_id = o2.id))`)) + `
		 ORDER BY o2.created_at DESC, o2.id DESC
		 LIMIT ` + a.p(MaxPageLimit)
	return q, a, nil
}

// SuspectedDoubleTaps returns the groups of charged orders (paid, or refunded since) that
// look like a customer charged more than once for one purchase under several idempotency
// keys (several taps, several keys: what keys cannot catch), newest first. The first order
// of each pair in a group matches f, the next came at most window (up to
// MaxDoubleTapWindow) after it; up to MaxPageLimit pairs are read. f needs a time range
// (From and To) or a customer; the cost grows with the number of orders f selects.
func SuspectedDoubleTaps(ctx context.Context, db sqlx.QueryerContext, f OrderFilter, window time.Duration) ([]DoubleTap, error) {
	q, a, err := doubleTapsSQL(f, window)
	if err != nil {
		return nil, err
	}
	var pairs []struct {
		First  int64 `db:"first_id"`
		Second int64 `db:"second_id"`
	}
	if err := sqlx.SelectContext(ctx, db, &pairs, q, a...); err != nil {
		return nil, fmt.Errorf("suspected double taps: %w", err)
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	// Pairs sharing an order are one group: join them (union-find on order ids).
	parent := map[int64]int64{}
	var find func(int64) int64
	find = func(id int64) int64 {
		p, ok := parent[id]
		if !ok {
			parent[id] = id
			return id
		}
		if p == id {
			return id
		}
		root := find(p)
		parent[id] = root
		return root
	}
	ids := make([]int64, 0, 2*len(pairs))
	for _, p := range pairs {
		ra, rb := find(p.First), find(p.Second)
		if ra != rb {
			parent[rb] = ra
		}
		ids = append(ids, p.First, p.Second)
	}
	orders, err := loadOrderRows(ctx, db, ids) // newest first
	if err != nil {
		return nil, fmt.Errorf("suspected double taps: %w", err)
	}
	byRoot := map[int64][]OrderRow{}
	var roots []int64 // by each group's newest order, newest first
	for _, o := range orders {
		r := find(o.ID)
		if _, ok := byRoot[r]; !ok {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], o)
	}
	out := make([]DoubleTap, 0, len(roots))
	for _, r := range roots {
		g := byRoot[r]
		if len(g) < 2 {
			continue // cannot happen: orders are never deleted
		}
		slices.Reverse(g)
		out = append(out, DoubleTap{Orders: g, Gap: g[len(g)-1].CreatedAt.Sub(g[0].CreatedAt)})
	}
	return out, nil
}

// DoubleTapsOf returns the suspected double tap (see SuspectedDoubleTaps) that order o is
// part of, if any: the orders of its customer that look like the same purchase, charged
// within window of it (or of another of them). ok is false when there is none.
func DoubleTapsOf(ctx context.Context, db sqlx.QueryerContext, o OrderRow, window time.Duration) (DoubleTap, bool, error) {
	if !checkout.ChargedStatuses.Has(o.Status) || (o.CustomerID == "" && o.CustomerEmail == "") {
		return DoubleTap{}, false, nil
	}
	// The group's first order is at most a few windows before o; a longer chain of taps is
	// seen from its own orders.
	const reach = 4
	f := OrderFilter{ClientID: o.ClientID, CustomerID: o.CustomerID, Amount: o.Amount,
		From: o.CreatedAt.Add(-reach * window), To: o.CreatedAt.Add(reach * window)}
	if o.CustomerID == "" {
		f.CustomerEmail = o.CustomerEmail
	}
	taps, err := SuspectedDoubleTaps(ctx, db, f, window)
	if err != nil {
		return DoubleTap{}, false, fmt.Errorf("double taps of order %d: %w", o.ID, err)
	}
	for _, t := range taps {
		if slices.ContainsFunc(t.Orders, func(x OrderRow) bool { return x.ID == o.ID }) {
			return t, true, nil
		}
	}
	return DoubleTap{}, false, nil
}

// OrderIDOf returns the internal id of the order whose public id is publicID: the console
// is addressed by public ids (its URLs, its filters) and its queries join on the internal
// one. ErrOrderNotFound: anything else, an integer id included.
func OrderIDOf(ctx context.Context, db sqlx.QueryerContext, publicID string) (int64, error) {
	if !checkout.ValidOrderID(publicID) {
		return 0, checkout.ErrOrderNotFound
	}
	var id int64
	err := sqlx.GetContext(ctx, db, &id, `SELECT id FROM orders WHERE public_id = $1`, publicID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, checkout.ErrOrderNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("order %s: %w", publicID, err)
	}
	return id, nil
}
