package report

// The console's lists of keys: the search by client, key, order, customer, state and time,
// and the keys about to expire. See report.go for the conventions (parameters only,
// index-backed, no whole scans).

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
)

// KeyFilter selects keys; every field is optional and they combine with AND.
type KeyFilter struct {
	ClientID   int64
	Key        string // exact
	CustomerID string // keys whose order (or whose refund's order) has this customer id
	OrderID    int64  // the order's key and the keys of its refunds
	State      string // in_progress, completed, needs_attention, or KeyStateExpired: swept keys
	From, To   time.Time
}

// KeyRow is a key as the console lists it.
type KeyRow struct {
	ID            int64  `db:"id"`
	ClientID      int64  `db:"client_id"`
	ClientName    string `db:"client_name"`
	Key           string `db:"key"`
	State         string `db:"state"`
	RecoveryPoint string `db:"recovery_point"`
	Method        string `db:"method"`
	Path          string `db:"path"`
	OrderID       *int64 `db:"order_id"`
	RefundID      *int64 `db:"refund_id"`
	RefundOrderID *int64 `db:"refund_order_id"` // the order a refund key refunds
	// OrderPublicID is the public id of the order the key made or refunds: what the console
	// shows and links by (the integers are internal).
	OrderPublicID  *string `db:"order_public_id"`
	ResponseStatus *int    `db:"response_status"`
	// CreatedAt is when the key first arrived (a swept key: first_seen), ExpiresAt when it
	// stops being honoured (a swept key: when it expired).
	CreatedAt time.Time `db:"created_at"`
	ExpiresAt time.Time `db:"expires_at"`
	// Replays counts the key's replayed events: repeats that got the stored response.
	Replays int64 `db:"replays"`
}

// keyPageColumns is what a page of keys selects from idempotency_keys k.
const keyPageColumns = `k.id, k.client_id, k.key, k.state, k.recovery_point, k.method, k.path,
	       k.order_id, k.refund_id, k.response_status, k.created_at, k.expires_at`

// keyRowsSQL completes a page of keys (the subquery p, LIMITed already) into KeyRows. The
// replay count is a subquery of this outer query, so it runs for the rows of the page only,
// each an index range of key_events_key_idx (the key's own events).
const keyRowsSQL = `
	SELECT p.id, p.client_id, c.name AS client_name, p.key, p.state, p.recovery_point, p.method,
	       p.path, p.order_id, p.refund_id, r.order_id AS refund_order_id,
	       (SELECT o.public_id FROM orders o WHERE o.id = coalesce(p.order_id, r.order_id)) AS order_public_id,
	       p.response_status, p.created_at, p.expires_at,
	       (SELECT count(*) FROM key_events e
	         WHERE e.client_id = p.client_id AND e.key = p.key AND e.key_id = p.id
	           AND e.kind = 'replayed') AS replays
	  FROM (%s) p
	  JOIN clients c ON c.id = p.client_id
	  LEFT JOIN refunds r ON r.id = p.refund_id
	 ORDER BY %s`

var keyStates = []string{checkout.StateInProgress, checkout.StateCompleted, checkout.StateNeedsAttention}

// listKeysSQL builds ListKeys' query for n+1 rows.
func listKeysSQL(f KeyFilter, page Page) (string, []any, error) {
	cur, err := page.decode()
	if err != nil {
		return "", nil, err
	}
	if f.State == checkout.KeyStateExpired {
		return expiredKeysSQL(f, cur, page)
	}
	if f.State != "" && !slices.Contains(keyStates, f.State) {
		return "", nil, invalidQuery("unknown key state %q", f.State)
	}
	var a sqlArgs
	var preds []string
	client := allClients
	if f.ClientID != 0 {
		client = a.p(f.ClientID)
		preds = append(preds, "k.client_id = "+client)
	}
	if f.Key != "" {
		if f.ClientID == 0 {
			preds = append(preds, "k.client_id = "+allClients)
		}
		preds = append(preds, "k.key = "+a.p(f.Key))
	}
	var order, customer string
	if f.OrderID != 0 {
		order = a.p(f.OrderID)
	}
	if f.CustomerID != "" {
		customer = a.p(f.CustomerID)
	}
	preds = append(preds, keyOwnerPreds(client, order, customer)...)
	if f.State != "" {
		preds = append(preds, "k.state = "+a.p(f.State))
		if f.State != checkout.StateCompleted {
			// Only keys without a response are not completed: this lets the partial
			// idempotency_keys_unanswered_idx match, even in a generic plan.
			preds = append(preds, "k.response_status IS NULL")
		}
	}
	if !f.From.IsZero() {
		preds = append(preds, "k.created_at >= "+a.t(f.From))
	}
	if !f.To.IsZero() {
		preds = append(preds, "k.created_at < "+a.t(f.To))
	}
	if cur != nil {
		preds = append(preds, "(k.created_at, k.id) < ("+a.p(cur.at)+"::timestamptz, "+a.p(cur.id)+"::bigint)")
	}
	limit := a.p(page.size() + 1)
	selective := f.ClientID != 0 || f.Key != "" || f.OrderID != 0 || f.CustomerID != "" ||
		(f.State != "" && f.State != checkout.StateCompleted)
	var inner string
	if selective {
		inner = `SELECT ` + keyPageColumns + ` FROM idempotency_keys k` + sqlWhere(preds) +
			` ORDER BY k.created_at DESC, k.id DESC LIMIT ` + limit
	} else {
		inner = `SELECT k.* FROM clients c CROSS JOIN LATERAL (
			SELECT ` + keyPageColumns + ` FROM idempotency_keys k` +
			sqlWhere(append([]string{"k.client_id = c.id"}, preds...)) +
			` ORDER BY k.created_at DESC, k.id DESC LIMIT ` + limit + `) k
			ORDER BY k.created_at DESC, k.id DESC LIMIT ` + limit
	}
	return fmt.Sprintf(keyRowsSQL, inner, "p.created_at DESC, p.id DESC"), a, nil
}

// expiredKeysSQL lists the swept keys (their tombstones, alias k like a key row: they
// have client_id, key, order_id and refund_id), most recently expired first. A tombstone
// has no id of its own once its row is deleted: a page ends on (expired_at, client_id,
// key). CreatedAt is when the key first arrived, ExpiresAt when it expired; a retry is
// refused until the tombstone is forgotten.
func expiredKeysSQL(f KeyFilter, cur *pageCursor, page Page) (string, []any, error) {
	var a sqlArgs
	var preds []string
	client := allClients
	if f.ClientID != 0 {
		client = a.p(f.ClientID)
		preds = append(preds, "k.client_id = "+client)
	}
	if f.Key != "" {
		preds = append(preds, "k.key = "+a.p(f.Key))
	}
	var order, customer string
	if f.OrderID != 0 {
		order = a.p(f.OrderID)
	}
	if f.CustomerID != "" {
		customer = a.p(f.CustomerID)
	}
	preds = append(preds, keyOwnerPreds(client, order, customer)...)
	if !f.From.IsZero() {
		preds = append(preds, "k.first_seen >= "+a.t(f.From))
	}
	if !f.To.IsZero() {
		preds = append(preds, "k.first_seen < "+a.t(f.To))
	}
	if cur != nil {
		preds = append(preds, "(k.expired_at, k.client_id, k.key) < ("+a.p(cur.at)+"::timestamptz, "+
			a.p(cur.id)+"::bigint, "+a.p(cur.key)+"::text)")
	}
	q := `
	SELECT coalesce(k.key_id, 0) AS id, k.client_id, c.name AS client_name, k.key,
	       '` + checkout.KeyStateExpired + `' AS state, '` + checkout.PointFinished + `' AS recovery_point, k.method, k.path,
	       k.order_id, k.refund_id, r.order_id AS refund_order_id, NULL::int AS response_status,
	       k.first_seen AS created_at, k.expired_at AS expires_at,
	       (SELECT count(*) FROM key_events e
	         WHERE e.client_id = k.client_id AND e.key = k.key AND e.at >= k.first_seen
	           AND e.kind = 'replayed') AS replays
	  FROM key_tombstones k
	  JOIN clients c ON c.id = k.client_id
	  LEFT JOIN refunds r ON r.id = k.refund_id` + sqlWhere(preds) + `
	 ORDER BY k.expired_at DESC, k.client_id DESC, k.key DESC
	 LIMIT ` + a.p(page.size()+1)
	return q, a, nil
}

// keyOwnerPreds returns the predicates that tie a key row or a tombstone (alias k: both have
// order_id and refund_id) to an order, or to the orders of a customer of client: the
// order's own key and the keys of its refunds. order and customer are placeholders; ""
// leaves that filter out.
func keyOwnerPreds(client, order, customer string) []string {
	var preds []string
	if order != "" {
		// ARRAY(...) is computed once, and "= ANY (array)" is an index condition: the OR
		// becomes a BitmapOr of the order and refund indexes. "IN (SELECT ...)" under an OR
		// would be a filter over every key.
		preds = append(preds, `(k.order_id = `+order+` OR k.refund_id = ANY (ARRAY(
			SELECT r.id FROM refunds r WHERE r.order_id = `+order+`)))`)
	}
	if customer != "" {
		orders := `ARRAY(SELECT o.id FROM orders o WHERE o.client_id = ` + client +
			` AND o.customer_id = ` + customer + `)`
		preds = append(preds, `(k.order_id = ANY (`+orders+`) OR k.refund_id = ANY (ARRAY(
			SELECT r.id FROM refunds r WHERE r.order_id = ANY (`+orders+`))))`)
	}
	return preds
}

// ListKeys returns a page of keys matching f, newest first.
func ListKeys(ctx context.Context, db sqlx.QueryerContext, f KeyFilter, page Page) ([]KeyRow, Page, error) {
	q, a, err := listKeysSQL(f, page)
	if err != nil {
		return nil, Page{}, err
	}
	var rows []KeyRow
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, Page{}, fmt.Errorf("list keys: %w", err)
	}
	if f.State == checkout.KeyStateExpired {
		n := page.size()
		nx := nextPage(n, len(rows), func() pageCursor {
			return pageCursor{at: rows[n-1].ExpiresAt, id: rows[n-1].ClientID, key: rows[n-1].Key}
		})
		if len(rows) > n {
			rows = rows[:n]
		}
		for i := range rows {
			rows[i].CreatedAt, rows[i].ExpiresAt = rows[i].CreatedAt.UTC(), rows[i].ExpiresAt.UTC()
		}
		return rows, nx, nil
	}
	return pageOfKeys(rows, page.size(), func(r KeyRow) time.Time { return r.CreatedAt })
}

func pageOfKeys(rows []KeyRow, n int, at func(KeyRow) time.Time) ([]KeyRow, Page, error) {
	nx := nextPage(n, len(rows), func() pageCursor { return pageCursor{at: at(rows[n-1]), id: rows[n-1].ID} })
	if len(rows) > n {
		rows = rows[:n]
	}
	for i := range rows {
		rows[i].CreatedAt, rows[i].ExpiresAt = rows[i].CreatedAt.UTC(), rows[i].ExpiresAt.UTC()
	}
	return rows, nx, nil
}

// expiringKeysSQL builds ExpiringKeys' query for n+1 rows: a range of
// idempotency_keys_expires_idx (expires_at, id), in its order.
func expiringKeysSQL(from, to time.Time, page Page) (string, []any, error) {
	cur, err := page.decode()
	if err != nil {
		return "", nil, err
	}
	if !to.After(from) {
		return "", nil, invalidQuery("empty time range")
	}
	var a sqlArgs
	preds := []string{"k.expires_at >= " + a.t(from), "k.expires_at < " + a.t(to)}
	if cur != nil {
		preds = append(preds, "(k.expires_at, k.id) > ("+a.p(cur.at)+"::timestamptz, "+a.p(cur.id)+"::bigint)")
	}
	inner := `SELECT ` + keyPageColumns + ` FROM idempotency_keys k` + sqlWhere(preds) +
		` ORDER BY k.expires_at, k.id LIMIT ` + a.p(page.size()+1)
	return fmt.Sprintf(keyRowsSQL, inner, "p.expires_at, p.id"), a, nil
}

// ExpiringKeys returns a page of the keys whose expires_at is in [from, to), soonest first.
// Keys in progress or needing attention are listed too, but the sweeper leaves them until
// they are finished.
func ExpiringKeys(ctx context.Context, db sqlx.QueryerContext, from, to time.Time, page Page) ([]KeyRow, Page, error) {
	q, a, err := expiringKeysSQL(from, to, page)
	if err != nil {
		return nil, Page{}, err
	}
	var rows []KeyRow
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, Page{}, fmt.Errorf("expiring keys: %w", err)
	}
	return pageOfKeys(rows, page.size(), func(r KeyRow) time.Time { return r.ExpiresAt })
}
