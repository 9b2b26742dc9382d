package report

// The console's lists of key events: the search by kind, client, key, order, customer and
// time, and one key's timeline. See report.go for the conventions (parameters only,
// index-backed, no whole scans).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout"
)

// HistoryRow is one history entry, a row of key_events.
type HistoryRow struct {
	ID          int64
	At          time.Time
	ClientID    int64
	Key         string
	KeyID       *int64 // nil: no key row (a late retry after the sweep)
	Kind        string
	Status      *int // the HTTP status answered; nil for the sweeper's events
	RequestID   string
	RemoteAddr  string
	UserAgent   string
	Fingerprint string          // hex; set where it matters (a conflict, a late retry)
	Detail      json.RawMessage // nil when none

	// Set by ListHistory only, so that a list can say what a conflict differed in and which
	// order a late retry was after: the client's name, and what the key stores (its row,
	// or once swept its tombstone): the first request's fingerprint (hex), method and path,
	// and the order it made (a refund key: the order refunded).
	ClientName     string
	KeyFingerprint string
	KeyMethod      string
	KeyPath        string
	OrderID        *int64  // nil: not known (no key row or tombstone left, or no order)
	OrderPublicID  *string // OrderID's public id: what the console shows and links by
}

type eventScan struct {
	ID          int64     `db:"id"`
	At          time.Time `db:"at"`
	ClientID    int64     `db:"client_id"`
	Key         string    `db:"key"`
	KeyID       *int64    `db:"key_id"`
	Kind        string    `db:"kind"`
	Status      *int      `db:"status"`
	RequestID   string    `db:"request_id"`
	RemoteAddr  string    `db:"remote_addr"`
	UserAgent   string    `db:"user_agent"`
	Fingerprint string    `db:"fingerprint"`
	Detail      *string   `db:"detail"`

	ClientName     string  `db:"client_name"`
	KeyFingerprint string  `db:"key_fingerprint"`
	KeyMethod      string  `db:"key_method"`
	KeyPath        string  `db:"key_path"`
	OrderID        *int64  `db:"order_id"`
	OrderPublicID  *string `db:"order_public_id"`
}

const eventColumns = `e.id, e.at, e.client_id, e.key, e.key_id, e.kind, e.status,
	       coalesce(e.request_id, '') AS request_id, coalesce(e.remote_addr, '') AS remote_addr,
	       coalesce(e.user_agent, '') AS user_agent,
	       coalesce(encode(e.fingerprint, 'hex'), '') AS fingerprint, e.detail::text AS detail`

// EventKinds are all kinds of key events.
var EventKinds = []string{checkout.KindCreated, checkout.KindReplayed, checkout.KindReusedConflict, checkout.KindInUseRejected,
	checkout.KindResumed, checkout.KindCompleted, checkout.KindExpired, checkout.KindLateRetry}

func selectHistory(ctx context.Context, db sqlx.QueryerContext, q string, a []any) ([]HistoryRow, error) {
	var rows []eventScan
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, err
	}
	out := make([]HistoryRow, len(rows))
	for i, r := range rows {
		out[i] = HistoryRow{ID: r.ID, At: r.At.UTC(), ClientID: r.ClientID, Key: r.Key, KeyID: r.KeyID,
			Kind: r.Kind, Status: r.Status, RequestID: r.RequestID, RemoteAddr: r.RemoteAddr,
			UserAgent: r.UserAgent, Fingerprint: r.Fingerprint, ClientName: r.ClientName,
			KeyFingerprint: r.KeyFingerprint, KeyMethod: r.KeyMethod, KeyPath: r.KeyPath, OrderID: r.OrderID,
			OrderPublicID: r.OrderPublicID}
		if r.Detail != nil {
			out[i].Detail = json.RawMessage(*r.Detail)
		}
	}
	return out, nil
}

const keyTimelineSQL = `
	SELECT ` + eventColumns + `
	  FROM key_events e
	 WHERE e.client_id = $1 AND e.key = $2
	 ORDER BY e.at, e.id
	 LIMIT $3`

// KeyTimeline returns the events of a key, oldest first: every request that reached it and
// what it was answered, then its expiry. It includes earlier incarnations of the key string
// (a key forgotten after its grace and used again); KeyID tells them apart. At most
// MaxTimelineEvents are returned.
func KeyTimeline(ctx context.Context, db sqlx.QueryerContext, clientID int64, key string) ([]HistoryRow, error) {
	rows, err := selectHistory(ctx, db, keyTimelineSQL, []any{clientID, key, MaxTimelineEvents})
	if err != nil {
		return nil, fmt.Errorf("key timeline: %w", err)
	}
	return rows, nil
}

// HistoryFilter selects history entries; every field is optional and they combine with AND.
type HistoryFilter struct {
	Kinds    []string // empty: every kind
	From, To time.Time
	ClientID int64
	Key      string // one key's events (at every client, without ClientID)
	// CustomerID and OrderID select the events of the keys that ListKeys finds for them
	// (the keys of the customer's orders or of the order, and of their refunds), and of the
	// swept ones among those keys, whose tombstones name the order. Events are matched by
	// key string: a key forgotten and used again brings the history of both uses.
	CustomerID string
	OrderID    int64
}

func validKinds(kinds []string) ([]string, error) {
	if len(kinds) == 0 {
		return EventKinds, nil
	}
	for _, k := range kinds {
		if !slices.Contains(EventKinds, k) {
			return nil, invalidQuery("unknown event kind %q", k)
		}
	}
	return kinds, nil
}

// eventRowsSQL completes a page of events (the subquery e, LIMITed already) with the
// client's name and what the event's key stores: the key row the event reached or, once it
// is swept, the key's tombstone (one from before the event: not a later use of the key
// string), and a refund key's order. Lookups by primary key for the rows of the page only:
// the tombstone's LATERAL has a LIMIT and the others are scalar subqueries, so that each
// stays one probe per row, never a join that could hash a whole table.
const eventRowsSQL = `
	SELECT e.*, (SELECT o.public_id FROM orders o WHERE o.id = e.order_id) AS order_public_id
	  FROM (
	SELECT e.*, coalesce((SELECT c.name FROM clients c WHERE c.id = e.client_id), '') AS client_name,
	       coalesce(encode(coalesce(k.fingerprint, t.fingerprint), 'hex'), '') AS key_fingerprint,
	       coalesce(k.method, t.method, '') AS key_method, coalesce(k.path, t.path, '') AS key_path,
	       coalesce(k.order_id, t.order_id,
	                (SELECT r.order_id FROM refunds r WHERE r.id = coalesce(k.refund_id, t.refund_id))) AS order_id
	  FROM (%s) e
	  LEFT JOIN idempotency_keys k ON k.id = e.key_id
	  LEFT JOIN LATERAL (
	       SELECT t.fingerprint, t.method, t.path, t.order_id, t.refund_id FROM key_tombstones t
	        WHERE k.id IS NULL AND t.client_id = e.client_id AND t.key = e.key AND t.first_seen <= e.at
	        LIMIT 1) t ON true
	  ) e
	 ORDER BY e.at DESC, e.id DESC`

// listHistorySQL builds ListHistory's query for n+1 rows. Without a key, each kind is read
// from its own index range, newest first, and the per-kind pages are merged: a single
// "kind = ANY (...)" range would return the rows in (kind, at) order and need a sort of the
// whole time range. A search by key (without the client), order or customer reads each
// key's own events instead (see historyOfKeysSQL).
func listHistorySQL(f HistoryFilter, page Page) (string, []any, error) {
	cur, err := page.decode()
	if err != nil {
		return "", nil, err
	}
	kinds, err := validKinds(f.Kinds)
	if err != nil {
		return "", nil, err
	}
	var a sqlArgs
	if f.OrderID != 0 || f.CustomerID != "" || (f.Key != "" && f.ClientID == 0) {
		return fmt.Sprintf(eventRowsSQL, historyOfKeysSQL(&a, f, kinds, cur, page)), a, nil
	}
	var preds []string
	if f.ClientID != 0 {
		preds = append(preds, "e.client_id = "+a.p(f.ClientID))
	}
	if f.Key != "" {
		preds = append(preds, "e.key = "+a.p(f.Key), "e.kind = ANY ("+a.p(pq.Array(kinds))+"::text[])")
	}
	preds = historyWindow(&a, preds, f, cur)
	limit := a.p(page.size() + 1)
	var inner string
	if f.Key != "" {
		inner = `SELECT ` + eventColumns + ` FROM key_events e` + sqlWhere(preds) +
			` ORDER BY e.at DESC, e.id DESC LIMIT ` + limit
	} else {
		preds = append([]string{"e.kind = kd.kind"}, preds...)
		inner = `SELECT e.* FROM unnest(` + a.p(pq.Array(kinds)) + `::text[]) AS kd (kind) CROSS JOIN LATERAL (
		SELECT ` + eventColumns + ` FROM key_events e` + sqlWhere(preds) + `
		 ORDER BY e.at DESC, e.id DESC LIMIT ` + limit + `) e
		 ORDER BY e.at DESC, e.id DESC LIMIT ` + limit
	}
	return fmt.Sprintf(eventRowsSQL, inner), a, nil
}

// historyOfKeysSQL is the inner query of an event search by key, order or customer. It
// lists the keys first, the (client_id, key) pairs of the events to show, then reads each
// key's newest events from key_events_key_idx (client_id, key, at) and merges them: a key
// alone names one pair per client; an order or a customer the keys that made the orders
// and their refunds, live (idempotency_keys) or swept (key_tombstones), found through the
// indexes ListKeys uses.
// historyWindow adds an event list's time range and page cursor to preds.
func historyWindow(a *sqlArgs, preds []string, f HistoryFilter, cur *pageCursor) []string {
	if !f.From.IsZero() {
		preds = append(preds, "e.at >= "+a.t(f.From))
	}
	if !f.To.IsZero() {
		preds = append(preds, "e.at < "+a.t(f.To))
	}
	if cur != nil {
		preds = append(preds, "(e.at, e.id) < ("+a.p(cur.at)+"::timestamptz, "+a.p(cur.id)+"::bigint)")
	}
	return preds
}

func historyOfKeysSQL(a *sqlArgs, f HistoryFilter, kinds []string, cur *pageCursor, page Page) string {
	var keys string
	if f.OrderID == 0 && f.CustomerID == "" {
		keys = `SELECT c.id AS client_id, ` + a.p(f.Key) + `::text AS key FROM clients c`
	} else {
		client := allClients
		var common []string
		if f.ClientID != 0 {
			client = a.p(f.ClientID)
			common = append(common, "k.client_id = "+client)
		}
		if f.Key != "" {
			if f.ClientID == 0 {
				common = append(common, "k.client_id = "+allClients)
			}
			common = append(common, "k.key = "+a.p(f.Key))
		}
		var order, customer string
		if f.OrderID != 0 {
			order = a.p(f.OrderID)
		}
		if f.CustomerID != "" {
			customer = a.p(f.CustomerID)
		}
		preds := sqlWhere(append(common, keyOwnerPreds(client, order, customer)...))
		// UNION, not UNION ALL: a key being swept has both a row and a tombstone.
		keys = `SELECT k.client_id, k.key FROM idempotency_keys k` + preds +
			` UNION SELECT k.client_id, k.key FROM key_tombstones k` + preds
	}
	preds := []string{"e.client_id = kk.client_id", "e.key = kk.key", "e.kind = ANY (" + a.p(pq.Array(kinds)) + "::text[])"}
	preds = historyWindow(a, preds, f, cur)
	limit := a.p(page.size() + 1)
	return `SELECT e.* FROM (` + keys + `) kk CROSS JOIN LATERAL (
		SELECT ` + eventColumns + ` FROM key_events e` + sqlWhere(preds) + `
		 ORDER BY e.at DESC, e.id DESC LIMIT ` + limit + `) e
		 ORDER BY e.at DESC, e.id DESC LIMIT ` + limit
}

// ListHistory returns a page of history entries matching f, newest first.
func ListHistory(ctx context.Context, db sqlx.QueryerContext, f HistoryFilter, page Page) ([]HistoryRow, Page, error) {
	q, a, err := listHistorySQL(f, page)
	if err != nil {
		return nil, Page{}, err
	}
	rows, err := selectHistory(ctx, db, q, a)
	if err != nil {
		return nil, Page{}, fmt.Errorf("list events: %w", err)
	}
	n := page.size()
	nx := nextPage(n, len(rows), func() pageCursor { return pageCursor{at: rows[n-1].At, id: rows[n-1].ID} })
	if len(rows) > n {
		rows = rows[:n]
	}
	return rows, nx, nil
}
