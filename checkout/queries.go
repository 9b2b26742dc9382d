package checkout

// The read queries of the operator console (package admin renders them): the searches that
// answer "I was charged twice". Plain structs and functions over any sqlx.QueryerContext.
//
// Every list is keyset-paginated (a page costs the same however deep it is) and every value
// reaches Postgres as a parameter. The SQL of a search is assembled from the constant
// fragments below with only the predicates its filter uses, so that each combination gets
// a plan made for it instead of one generic plan full of "$n IS NULL OR ..." branches. The
// number of distinct texts is small and bounded, but they are not hot-path statements: pass
// the pool, not a db.Prepared.
//
// The indexes these queries rely on are in migrations 00004 and 00005; queries_test.go
// checks at 200,000 keys that no plan scans idempotency_keys, orders or key_events whole.
//
// Two patterns recur, both to avoid an index on idempotency_keys (the checkout hot path):
//   - "newest first over all clients" reads each client's own (client_id, created_at)
//     index with a LATERAL subquery and merges the per-client pages: clients are few (apps
//     and POS fleets), so this costs a few index descents per client instead of a global
//     created_at index;
//   - an exact search without a client ("key k", "customer c") names the clients as
//     client_id = ANY (ARRAY(SELECT id FROM clients)), which lets the (client_id, ...)
//     indexes be probed once per client.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Page sizes of the console's lists.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 200
	// MaxTimelineEvents bounds KeyTimeline; a key with more events (a client replaying it in
	// a loop) shows its oldest ones, and ListEvents with EventFilter.Key pages through all.
	MaxTimelineEvents = 1000
	// MaxRateBuckets bounds ReplayRate.
	MaxRateBuckets = 1000
)

// KeyStateExpired is the state GetKey reports for a key that the sweeper removed: only its
// tombstone is left.
const KeyStateExpired = "expired"

// CountRequests is the key of EventCounts' total of keyed requests: every event a request
// leaves (created, replayed, reused_conflict, in_use_rejected, resumed, late_retry), not
// the completed events that follow a created or resumed one, nor the sweeper's expired.
const CountRequests = "requests"

// ErrInvalidQuery wraps every refusal of a console query's input (an unknown state or
// kind, a malformed cursor, an empty time range): the console answers it with a 400.
var ErrInvalidQuery = errors.New("invalid console query")

func invalidQuery(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidQuery, fmt.Sprintf(format, args...))
}

// Page asks for one page of a list. The zero Page is the first page of DefaultPageLimit
// rows. A list returns the Page of its next rows; its After is empty on the last page.
type Page struct {
	Limit int    // rows per page: 0 means DefaultPageLimit, more than MaxPageLimit means MaxPageLimit
	After string // opaque cursor from the previous page; empty for the first page
}

func (p Page) size() int {
	switch {
	case p.Limit <= 0:
		return DefaultPageLimit
	case p.Limit > MaxPageLimit:
		return MaxPageLimit
	}
	return p.Limit
}

// pageCursor is the sort key of the last row of a page: a time and the row id that breaks ties.
type pageCursor struct {
	at time.Time
	id int64
}

func (c pageCursor) String() string {
	return strconv.FormatInt(c.at.UnixMicro(), 10) + "_" + strconv.FormatInt(c.id, 10)
}

// decode returns the page's cursor, or nil on the first page.
func (p Page) decode() (*pageCursor, error) {
	if p.After == "" {
		return nil, nil
	}
	us, id, ok := strings.Cut(p.After, "_")
	if !ok {
		return nil, invalidQuery("malformed page cursor")
	}
	u, err1 := strconv.ParseInt(us, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, invalidQuery("malformed page cursor")
	}
	return &pageCursor{at: time.UnixMicro(u).UTC(), id: n}, nil
}

// nextPage returns the page after rows (fetched with one row more than n, to know there is one).
func nextPage(n, got int, last func() pageCursor) Page {
	if got <= n {
		return Page{Limit: n}
	}
	return Page{Limit: n, After: last().String()}
}

// sqlArgs collects query parameters; p adds one and returns its placeholder.
type sqlArgs []any

func (a *sqlArgs) p(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// t adds a time bound. Postgres keeps microseconds and rounds finer times to the nearest
// one; rounding bounds up instead keeps "at >= from" and "at < to" exact for them.
func (a *sqlArgs) t(v time.Time) string { return a.p(ceilMicro(v)) }

func ceilMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); !r.Equal(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

func sqlWhere(preds []string) string {
	if len(preds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(preds, " AND ")
}

// allClients stands for "any client" where an index leads with client_id (see the top).
const allClients = `ANY (ARRAY(SELECT id FROM clients))`

// ---------------------------------------------------------------------------------------
// Keys

// KeyFilter selects keys; every field is optional and they combine with AND.
type KeyFilter struct {
	ClientID   int64
	Key        string // exact
	CustomerID string // keys whose order (or whose refund's order) has this customer id
	OrderID    int64  // the order's key and the keys of its refunds
	State      string // in_progress, completed or needs_attention
	From, To   time.Time
}

// KeyRow is a key as the console lists it.
type KeyRow struct {
	ID             int64  `db:"id"`
	ClientID       int64  `db:"client_id"`
	ClientName     string `db:"client_name"`
	Key            string `db:"key"`
	State          string `db:"state"`
	RecoveryPoint  string `db:"recovery_point"`
	Method         string `db:"method"`
	Path           string `db:"path"`
	OrderID        *int64 `db:"order_id"`
	RefundID       *int64 `db:"refund_id"`
	RefundOrderID  *int64 `db:"refund_order_id"` // the order a refund key refunds
	ResponseStatus *int   `db:"response_status"`
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
	       p.path, p.order_id, p.refund_id, r.order_id AS refund_order_id, p.response_status,
	       p.created_at, p.expires_at,
	       (SELECT count(*) FROM key_events e
	         WHERE e.client_id = p.client_id AND e.key = p.key AND e.key_id = p.id
	           AND e.kind = 'replayed') AS replays
	  FROM (%s) p
	  JOIN clients c ON c.id = p.client_id
	  LEFT JOIN refunds r ON r.id = p.refund_id
	 ORDER BY %s`

var keyStates = []string{StateInProgress, StateCompleted, StateNeedsAttention}

// listKeysSQL builds ListKeys' query for n+1 rows.
func listKeysSQL(f KeyFilter, page Page) (string, []any, error) {
	cur, err := page.decode()
	if err != nil {
		return "", nil, err
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
		if f.State != StateCompleted {
			// Lets the partial idempotency_keys_open_idx match even in a generic plan.
			preds = append(preds, "k.state <> 'completed'")
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
		(f.State != "" && f.State != StateCompleted)
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
	return pageOfKeys(rows, page.size(), func(r KeyRow) time.Time { return r.CreatedAt })
}

func pageOfKeys(rows []KeyRow, n int, at func(KeyRow) time.Time) ([]KeyRow, Page, error) {
	nx := nextPage(n, len(rows), func() pageCursor { return pageCursor{at(rows[n-1]), rows[n-1].ID} })
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

// NeedsAttention counts the keys an operator has to resolve.
func NeedsAttention(ctx context.Context, db sqlx.QueryerContext) (int64, error) {
	var n int64
	// A constant state, so that the partial idempotency_keys_open_idx answers it.
	err := sqlx.GetContext(ctx, db, &n, `SELECT count(*) FROM idempotency_keys WHERE state = 'needs_attention'`)
	if err != nil {
		return 0, fmt.Errorf("count keys needing attention: %w", err)
	}
	return n, nil
}

// KeyDetail is everything about one key: the row, its stored response, what it made, and
// its tombstone once the sweeper has expired it.
type KeyDetail struct {
	KeyRow
	Fingerprint     string // hex SHA-256 of the first request (see FingerprintAlgorithm)
	LeaseToken      int64
	LeaseExpiresAt  *time.Time
	AttentionReason string
	CompletedAt     *time.Time
	// The stored response, replayed byte for byte to repeats; empty until completed.
	ResponseHeaders map[string]string
	ResponseBody    []byte
	// Tombstone is set once the key was expired. Without a key row (ID 0) the key is
	// swept: State is KeyStateExpired and the fields of KeyRow come from the tombstone.
	Tombstone *Tombstone
	// Order is the key's order, or the order its refund refunds; Refunds are that order's.
	Order   *OrderRow
	Refunds []RefundRow
}

// Tombstone is what stays of a swept key for its client's grace period: a retry with the
// key is refused until ForgetAt, after which the key is new again.
type Tombstone struct {
	KeyID     *int64    // the key row, until the sweeper deletes it
	FirstSeen time.Time // the key's first arrival
	ExpiredAt time.Time
	ForgetAt  time.Time
	CreatedAt time.Time // when the sweeper wrote it
}

// RefundRow is a refund of an order, with the key that asked for it.
type RefundRow struct {
	ID               int64     `db:"id"`
	OrderID          int64     `db:"order_id"`
	Amount           int64     `db:"amount"`
	Currency         string    `db:"currency"`
	Status           string    `db:"status"`
	Reason           string    `db:"reason"`
	ProviderRefundID string    `db:"provider_refund_id"`
	CreatedAt        time.Time `db:"created_at"`
	UpdatedAt        time.Time `db:"updated_at"`
	Key              string    `db:"key"` // empty once the key is forgotten
}

const getKeySQL = `
	SELECT k.id, k.client_id, c.name AS client_name, k.key, k.state, k.recovery_point, k.method,
	       k.path, k.order_id, k.refund_id, r.order_id AS refund_order_id, k.response_status,
	       k.created_at, k.expires_at,
	       (SELECT count(*) FROM key_events e
	         WHERE e.client_id = k.client_id AND e.key = k.key AND e.key_id = k.id
	           AND e.kind = 'replayed') AS replays,
	       encode(k.fingerprint, 'hex') AS fingerprint, k.lease_token, k.lease_expires_at,
	       coalesce(k.attention_reason, '') AS attention_reason, k.completed_at,
	       k.response_headers::text AS response_headers, k.response_body
	  FROM idempotency_keys k
	  JOIN clients c ON c.id = k.client_id
	  LEFT JOIN refunds r ON r.id = k.refund_id
	 WHERE k.client_id = $1 AND k.key = $2`

// getTombstoneSQL counts the replays of every incarnation of the key: the swept row's id is
// gone from the tombstone once the row is deleted.
const getTombstoneSQL = `
	SELECT t.client_id, c.name AS client_name, t.key, t.key_id, encode(t.fingerprint, 'hex') AS fingerprint,
	       t.method, t.path, t.order_id, t.refund_id, r.order_id AS refund_order_id,
	       t.first_seen, t.expired_at, t.forget_at, t.created_at,
	       (SELECT count(*) FROM key_events e
	         WHERE e.client_id = t.client_id AND e.key = t.key AND e.kind = 'replayed') AS replays
	  FROM key_tombstones t
	  JOIN clients c ON c.id = t.client_id
	  LEFT JOIN refunds r ON r.id = t.refund_id
	 WHERE t.client_id = $1 AND t.key = $2`

const orderRefundsSQL = `
	SELECT r.id, r.order_id, r.amount, r.currency, r.status, coalesce(r.reason, '') AS reason,
	       coalesce(r.provider_refund_id, '') AS provider_refund_id, r.created_at, r.updated_at,
	       coalesce((SELECT k.key FROM idempotency_keys k WHERE k.refund_id = r.id),
	                (SELECT t.key FROM key_tombstones t WHERE t.refund_id = r.id LIMIT 1), '') AS key
	  FROM refunds r
	 WHERE r.order_id = $1
	 ORDER BY r.id`

type keyDetailRow struct {
	KeyRow
	Fingerprint     string       `db:"fingerprint"`
	LeaseToken      int64        `db:"lease_token"`
	LeaseExpiresAt  sql.NullTime `db:"lease_expires_at"`
	AttentionReason string       `db:"attention_reason"`
	CompletedAt     sql.NullTime `db:"completed_at"`
	ResponseHeaders *string      `db:"response_headers"`
	ResponseBody    []byte       `db:"response_body"`
}

type tombstoneRow struct {
	ClientID      int64     `db:"client_id"`
	ClientName    string    `db:"client_name"`
	Key           string    `db:"key"`
	KeyID         *int64    `db:"key_id"`
	Fingerprint   string    `db:"fingerprint"`
	Method        string    `db:"method"`
	Path          string    `db:"path"`
	OrderID       *int64    `db:"order_id"`
	RefundID      *int64    `db:"refund_id"`
	RefundOrderID *int64    `db:"refund_order_id"`
	FirstSeen     time.Time `db:"first_seen"`
	ExpiredAt     time.Time `db:"expired_at"`
	ForgetAt      time.Time `db:"forget_at"`
	CreatedAt     time.Time `db:"created_at"`
	Replays       int64     `db:"replays"`
}

// GetKey returns everything about one key of a client: the live row, or, once the sweeper
// removed it, its tombstone (State KeyStateExpired). ErrKeyNotFound: neither exists.
func GetKey(ctx context.Context, db sqlx.QueryerContext, clientID int64, key string) (KeyDetail, error) {
	var d KeyDetail
	var row keyDetailRow
	err := sqlx.GetContext(ctx, db, &row, getKeySQL, clientID, key)
	live := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return KeyDetail{}, fmt.Errorf("get key: %w", err)
	}
	var t tombstoneRow
	err = sqlx.GetContext(ctx, db, &t, getTombstoneSQL, clientID, key)
	dead := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return KeyDetail{}, fmt.Errorf("get key tombstone: %w", err)
	}
	switch {
	case live:
		d = KeyDetail{KeyRow: row.KeyRow, Fingerprint: row.Fingerprint, LeaseToken: row.LeaseToken,
			AttentionReason: row.AttentionReason, ResponseBody: row.ResponseBody}
		d.CreatedAt, d.ExpiresAt = d.CreatedAt.UTC(), d.ExpiresAt.UTC()
		if row.LeaseExpiresAt.Valid {
			at := row.LeaseExpiresAt.Time.UTC()
			d.LeaseExpiresAt = &at
		}
		if row.CompletedAt.Valid {
			at := row.CompletedAt.Time.UTC()
			d.CompletedAt = &at
		}
		if row.ResponseHeaders != nil {
			if err := json.Unmarshal([]byte(*row.ResponseHeaders), &d.ResponseHeaders); err != nil {
				return KeyDetail{}, fmt.Errorf("stored response headers of key %d: %w", row.ID, err)
			}
		}
		// A tombstone of an earlier incarnation of the key (forgotten, then used again) is
		// not this row's.
		if dead && t.KeyID != nil && *t.KeyID == row.ID {
			d.Tombstone = t.tombstone()
		}
	case dead:
		d = KeyDetail{KeyRow: KeyRow{ClientID: t.ClientID, ClientName: t.ClientName, Key: t.Key,
			State: KeyStateExpired, RecoveryPoint: PointFinished, Method: t.Method, Path: t.Path,
			OrderID: t.OrderID, RefundID: t.RefundID, RefundOrderID: t.RefundOrderID,
			CreatedAt: t.FirstSeen.UTC(), ExpiresAt: t.ExpiredAt.UTC(), Replays: t.Replays},
			Fingerprint: t.Fingerprint, Tombstone: t.tombstone()}
	default:
		return KeyDetail{}, ErrKeyNotFound
	}
	orderID := d.OrderID
	if orderID == nil {
		orderID = d.RefundOrderID
	}
	if orderID == nil {
		return d, nil
	}
	orders, err := loadOrderRows(ctx, db, []int64{*orderID})
	if err != nil {
		return KeyDetail{}, err
	}
	if len(orders) == 1 {
		d.Order = &orders[0]
	}
	if err := sqlx.SelectContext(ctx, db, &d.Refunds, orderRefundsSQL, *orderID); err != nil {
		return KeyDetail{}, fmt.Errorf("get key: refunds: %w", err)
	}
	for i := range d.Refunds {
		d.Refunds[i].CreatedAt, d.Refunds[i].UpdatedAt = d.Refunds[i].CreatedAt.UTC(), d.Refunds[i].UpdatedAt.UTC()
	}
	return d, nil
}

func (t *tombstoneRow) tombstone() *Tombstone {
	return &Tombstone{KeyID: t.KeyID, FirstSeen: t.FirstSeen.UTC(), ExpiredAt: t.ExpiredAt.UTC(),
		ForgetAt: t.ForgetAt.UTC(), CreatedAt: t.CreatedAt.UTC()}
}

// ---------------------------------------------------------------------------------------
// Events

// EventRow is one entry of key_events.
type EventRow struct {
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

	// Set by ListEvents only, so that a list can say what a conflict differed in and which
	// order a late retry was after: the client's name, and what the key stores (its row,
	// or once swept its tombstone): the first request's fingerprint (hex), method and path,
	// and the order it made (a refund key: the order refunded).
	ClientName     string
	KeyFingerprint string
	KeyMethod      string
	KeyPath        string
	OrderID        *int64 // nil: not known (no key row or tombstone left, or no order)
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

	ClientName     string `db:"client_name"`
	KeyFingerprint string `db:"key_fingerprint"`
	KeyMethod      string `db:"key_method"`
	KeyPath        string `db:"key_path"`
	OrderID        *int64 `db:"order_id"`
}

const eventColumns = `e.id, e.at, e.client_id, e.key, e.key_id, e.kind, e.status,
	       coalesce(e.request_id, '') AS request_id, coalesce(e.remote_addr, '') AS remote_addr,
	       coalesce(e.user_agent, '') AS user_agent,
	       coalesce(encode(e.fingerprint, 'hex'), '') AS fingerprint, e.detail::text AS detail`

// EventKinds are all kinds of key events.
var EventKinds = []string{EventCreated, EventReplayed, EventReusedConflict, EventInUseRejected,
	EventResumed, EventCompleted, EventExpired, EventLateRetry}

// requestKinds are the kinds of event that a keyed request leaves, one per request.
var requestKinds = []string{EventCreated, EventReplayed, EventReusedConflict, EventInUseRejected,
	EventResumed, EventLateRetry}

func selectEvents(ctx context.Context, db sqlx.QueryerContext, q string, a []any) ([]EventRow, error) {
	var rows []eventScan
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, err
	}
	out := make([]EventRow, len(rows))
	for i, r := range rows {
		out[i] = EventRow{ID: r.ID, At: r.At.UTC(), ClientID: r.ClientID, Key: r.Key, KeyID: r.KeyID,
			Kind: r.Kind, Status: r.Status, RequestID: r.RequestID, RemoteAddr: r.RemoteAddr,
			UserAgent: r.UserAgent, Fingerprint: r.Fingerprint, ClientName: r.ClientName,
			KeyFingerprint: r.KeyFingerprint, KeyMethod: r.KeyMethod, KeyPath: r.KeyPath, OrderID: r.OrderID}
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
func KeyTimeline(ctx context.Context, db sqlx.QueryerContext, clientID int64, key string) ([]EventRow, error) {
	rows, err := selectEvents(ctx, db, keyTimelineSQL, []any{clientID, key, MaxTimelineEvents})
	if err != nil {
		return nil, fmt.Errorf("key timeline: %w", err)
	}
	return rows, nil
}

// EventFilter selects events; every field is optional and they combine with AND.
type EventFilter struct {
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
	 ORDER BY e.at DESC, e.id DESC`

// listEventsSQL builds ListEvents' query for n+1 rows. Without a key, each kind is read
// from its own index range, newest first, and the per-kind pages are merged: a single
// "kind = ANY (...)" range would return the rows in (kind, at) order and need a sort of the
// whole time range. A search by key (without the client), order or customer reads each
// key's own events instead (see eventsOfKeysSQL).
func listEventsSQL(f EventFilter, page Page) (string, []any, error) {
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
		return fmt.Sprintf(eventRowsSQL, eventsOfKeysSQL(&a, f, kinds, cur, page)), a, nil
	}
	var preds []string
	if f.ClientID != 0 {
		preds = append(preds, "e.client_id = "+a.p(f.ClientID))
	}
	if f.Key != "" {
		preds = append(preds, "e.key = "+a.p(f.Key), "e.kind = ANY ("+a.p(pq.Array(kinds))+"::text[])")
	}
	if !f.From.IsZero() {
		preds = append(preds, "e.at >= "+a.t(f.From))
	}
	if !f.To.IsZero() {
		preds = append(preds, "e.at < "+a.t(f.To))
	}
	if cur != nil {
		preds = append(preds, "(e.at, e.id) < ("+a.p(cur.at)+"::timestamptz, "+a.p(cur.id)+"::bigint)")
	}
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

// eventsOfKeysSQL is the inner query of an event search by key, order or customer. It
// lists the keys first, the (client_id, key) pairs of the events to show, then reads each
// key's newest events from key_events_key_idx (client_id, key, at) and merges them: a key
// alone names one pair per client; an order or a customer the keys that made the orders
// and their refunds, live (idempotency_keys) or swept (key_tombstones), found through the
// indexes ListKeys uses.
func eventsOfKeysSQL(a *sqlArgs, f EventFilter, kinds []string, cur *pageCursor, page Page) string {
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
	if !f.From.IsZero() {
		preds = append(preds, "e.at >= "+a.t(f.From))
	}
	if !f.To.IsZero() {
		preds = append(preds, "e.at < "+a.t(f.To))
	}
	if cur != nil {
		preds = append(preds, "(e.at, e.id) < ("+a.p(cur.at)+"::timestamptz, "+a.p(cur.id)+"::bigint)")
	}
	limit := a.p(page.size() + 1)
	return `SELECT e.* FROM (` + keys + `) kk CROSS JOIN LATERAL (
		SELECT ` + eventColumns + ` FROM key_events e` + sqlWhere(preds) + `
		 ORDER BY e.at DESC, e.id DESC LIMIT ` + limit + `) e
		 ORDER BY e.at DESC, e.id DESC LIMIT ` + limit
}

// ListEvents returns a page of events matching f, newest first.
func ListEvents(ctx context.Context, db sqlx.QueryerContext, f EventFilter, page Page) ([]EventRow, Page, error) {
	q, a, err := listEventsSQL(f, page)
	if err != nil {
		return nil, Page{}, err
	}
	rows, err := selectEvents(ctx, db, q, a)
	if err != nil {
		return nil, Page{}, fmt.Errorf("list events: %w", err)
	}
	n := page.size()
	nx := nextPage(n, len(rows), func() pageCursor { return pageCursor{rows[n-1].At, rows[n-1].ID} })
	if len(rows) > n {
		rows = rows[:n]
	}
	return rows, nx, nil
}

// eventCountsSQL counts by kind with one index range per kind: (kind, at) over all clients,
// (client_id, kind, at) for one; both index-only.
func eventCountsSQL(from, to time.Time, clientID int64) (string, []any, error) {
	if !to.After(from) {
		return "", nil, invalidQuery("empty time range")
	}
	var a sqlArgs
	preds := []string{"e.kind = ANY (" + a.p(pq.Array(EventKinds)) + "::text[])",
		"e.at >= " + a.t(from), "e.at < " + a.t(to)}
	if clientID != 0 {
		preds = append(preds, "e.client_id = "+a.p(clientID))
	}
	return `SELECT e.kind, count(*) AS n FROM key_events e` + sqlWhere(preds) + ` GROUP BY e.kind`, a, nil
}

// EventCounts counts the events of each kind in [from, to), of one client or (clientID 0)
// of all: the console's overview. Every kind is in the map, with 0 if none happened, and
// CountRequests holds the number of keyed requests.
func EventCounts(ctx context.Context, db sqlx.QueryerContext, from, to time.Time, clientID int64) (map[string]int64, error) {
	q, a, err := eventCountsSQL(from, to, clientID)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		Kind string `db:"kind"`
		N    int64  `db:"n"`
	}
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, fmt.Errorf("count events: %w", err)
	}
	m := make(map[string]int64, len(EventKinds)+1)
	for _, k := range EventKinds {
		m[k] = 0
	}
	m[CountRequests] = 0
	for _, r := range rows {
		m[r.Kind] = r.N
		if slices.Contains(requestKinds, r.Kind) {
			m[CountRequests] += r.N
		}
	}
	return m, nil
}

// RateBucket is one bar of the replay chart: the keys first executed and the repeats
// answered from storage in [Start, End).
type RateBucket struct {
	Start, End time.Time
	Created    int64
	Replayed   int64
}

func replayRateSQL(from, to time.Time, buckets int) (string, []any, time.Duration, error) {
	if !to.After(from) {
		return "", nil, 0, invalidQuery("empty time range")
	}
	if buckets < 1 || buckets > MaxRateBuckets {
		return "", nil, 0, invalidQuery("buckets must be between 1 and %d", MaxRateBuckets)
	}
	// Whole microseconds, Postgres' precision, rounded up so that the buckets cover [from, to).
	// date_part is a double, unlike extract's numeric which costs twice as much per event,
	// and exact here: the offset is a whole number of microseconds well within 2^53, and
	// the cast to bigint rounds to it.
	us := max((to.Sub(from).Microseconds()+int64(buckets)-1)/int64(buckets), 1)
	width := time.Duration(us) * time.Microsecond
	return `
		SELECT (date_part('epoch', e.at - $1::timestamptz) * 1000000)::bigint / $3::bigint AS b,
		       count(*) FILTER (WHERE e.kind = 'created') AS created,
		       count(*) FILTER (WHERE e.kind = 'replayed') AS replayed
		  FROM key_events e
		 WHERE e.kind IN ('created', 'replayed') AND e.at >= $1 AND e.at < $2
		 GROUP BY 1`, []any{from, to, width.Microseconds()}, width, nil
}

// ReplayRate splits [from, to) into buckets of equal width (the last one may be cut short
// by to) and counts created and replayed events in each, over all clients.
func ReplayRate(ctx context.Context, db sqlx.QueryerContext, from, to time.Time, buckets int) ([]RateBucket, error) {
	from, to = ceilMicro(from), ceilMicro(to)
	q, a, width, err := replayRateSQL(from, to, buckets)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		B        int64 `db:"b"`
		Created  int64 `db:"created"`
		Replayed int64 `db:"replayed"`
	}
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, fmt.Errorf("replay rate: %w", err)
	}
	out := make([]RateBucket, buckets)
	for i := range out {
		out[i].Start = minTime(from.Add(time.Duration(i)*width), to).UTC()
		out[i].End = minTime(from.Add(time.Duration(i+1)*width), to).UTC()
	}
	for _, r := range rows {
		b := min(max(r.B, 0), int64(buckets-1))
		out[b].Created += r.Created
		out[b].Replayed += r.Replayed
	}
	return out, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// SweepRow is one pass of the sweeper.
type SweepRow struct {
	ID                  int64     `db:"id"`
	StartedAt           time.Time `db:"started_at"`
	FinishedAt          time.Time `db:"finished_at"`
	Node                string    `db:"node"`
	KeysTombstoned      int64     `db:"keys_tombstoned"`
	KeysDeleted         int64     `db:"keys_deleted"`
	TombstonesForgotten int64     `db:"tombstones_forgotten"`
	EventsDeleted       int64     `db:"events_deleted"`
	Batches             int       `db:"batches"`
	Error               string    `db:"error"` // empty: the pass succeeded
}

const recentSweepsSQL = `
	SELECT id, started_at, finished_at, node, keys_tombstoned, keys_deleted, tombstones_forgotten,
	       events_deleted, batches, coalesce(error, '') AS error
	  FROM sweeps
	 ORDER BY id DESC
	 LIMIT $1`

// RecentSweeps returns the last limit sweeper passes (at most MaxPageLimit), newest first.
func RecentSweeps(ctx context.Context, db sqlx.QueryerContext, limit int) ([]SweepRow, error) {
	var rows []SweepRow
	if err := sqlx.SelectContext(ctx, db, &rows, recentSweepsSQL, Page{Limit: limit}.size()); err != nil {
		return nil, fmt.Errorf("recent sweeps: %w", err)
	}
	for i := range rows {
		rows[i].StartedAt, rows[i].FinishedAt = rows[i].StartedAt.UTC(), rows[i].FinishedAt.UTC()
	}
	return rows, nil
}

// ---------------------------------------------------------------------------------------
// Orders

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
	ID             int64
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
	r := OrderRow{ID: s.ID, ClientID: s.ClientID, ClientName: s.ClientName, Status: s.Status,
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

const orderPageColumns = `o.id, o.client_id, o.status, o.amount, o.currency, o.items, o.customer_id,
	       o.customer_email, o.refunded_amount, o.created_at, o.updated_at`

// orderRowsSQL completes a page of orders (the subquery o) with client, payment and keys,
// for the rows of the page only.
const orderRowsSQL = `
	SELECT o.id, o.client_id, c.name AS client_name, o.status, o.amount, o.currency,
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
	nx := nextPage(n, len(rows), func() pageCursor { return pageCursor{rows[n-1].CreatedAt, rows[n-1].ID} })
	if len(rows) > n {
		rows = rows[:n]
	}
	return rows, nx, nil
}

// DoubleTap is a pair of paid orders that look like one purchase charged twice: the same
// client, the same customer (id, or email regardless of case), the same amount and items,
// Gap apart, under different idempotency keys.
type DoubleTap struct {
	First, Second OrderRow
	Gap           time.Duration
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
	preds, join, _ := orderPreds(&a, f)
	if f.ClientID == 0 && f.CustomerID == "" && f.Amount == 0 && f.CustomerEmail == "" && f.CardLast4 == "" {
		// Only a time range: read orders_client_created_idx once per client.
		preds = append(preds, "o.client_id = "+allClients)
	}
	from := ` FROM orders o`
	if join {
		from += ` JOIN payments p ON p.order_id = o.id`
	}
	w := a.p(window.Microseconds())
	// The partners of an order are read from orders_client_amount_idx: same client and
	// amount, in the window after it. OFFSET 0 keeps the subquery a probe per first order
	// (a plain one would be pulled up into a join, free to hash all orders) and keeps the
	// customer comparison out of it: inside, the planner may probe the customer's indexes
	// instead, which reads a regular customer's whole history for every order.
	q := `
		SELECT o.id AS first_id, o2.id AS second_id` + from + `
		 CROSS JOIN LATERAL (
		       SELECT o2.id, o2.created_at, o2.customer_id, o2.customer_email FROM orders o2
		        WHERE o2.client_id = o.client_id AND o2.amount = o.amount
		          AND o2.created_at >= o.created_at
		          AND o2.created_at <= o.created_at + ` + w + `::bigint * interval '1 microsecond'
		          AND (o2.created_at, o2.id) > (o.created_at, o.id)
		          AND o2.status = 'paid' AND o2.items = o.items
		       OFFSET 0
		       ) o2` + sqlWhere(append(preds, "o.status = 'paid'",
		"(o2.customer_id = o.customer_id OR lower(o2.customer_email) = lower(o.customer_email))",
		`NOT (ARRAY(SELECT k.key FROM idempotency_keys k WHERE k.order_id = o.id
		             UNION ALL SELECT t.key FROM key_tombstones t WHERE t.order_id = o.id)
		      && ARRAY(SELECT k.key FROM idempotency_keys k WHERE k.order_id = o2.id
		             UNION ALL SELECT t.key FROM key_tombstones t WHERE t.order_id = o2.id))`)) + `
		 ORDER BY o2.created_at DESC, o2.id DESC
		 LIMIT ` + a.p(MaxPageLimit)
	return q, a, nil
}

// SuspectedDoubleTaps returns up to MaxPageLimit pairs of paid orders that look like a
// customer charged twice for one purchase under two idempotency keys (two taps, two keys:
// what keys cannot catch), newest first. The first order of a pair matches f; the second
// came at most window (up to MaxDoubleTapWindow) after it. f needs a time range (From and
// To) or a customer; the cost grows with the number of orders f selects.
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
	ids := make([]int64, 0, 2*len(pairs))
	for _, p := range pairs {
		ids = append(ids, p.First, p.Second)
	}
	orders, err := loadOrderRows(ctx, db, ids)
	if err != nil {
		return nil, fmt.Errorf("suspected double taps: %w", err)
	}
	byID := make(map[int64]OrderRow, len(orders))
	for _, o := range orders {
		byID[o.ID] = o
	}
	out := make([]DoubleTap, 0, len(pairs))
	for _, p := range pairs {
		first, ok1 := byID[p.First]
		second, ok2 := byID[p.Second]
		if !ok1 || !ok2 {
			continue // cannot happen: orders are never deleted
		}
		out = append(out, DoubleTap{First: first, Second: second, Gap: second.CreatedAt.Sub(first.CreatedAt)})
	}
	return out, nil
}
