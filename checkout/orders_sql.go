package checkout

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/problem"
)

// providerKey derives the key tekrar sends the provider for one step ("charge", "refund")
// of a key row; a cancel fences the charge's. It never reveals the client's raw key.
//
// A row claimed with an intent (every row since migration 35) derives it from the intent
// and the step alone, nothing of the row: a resumed request sends the same key, and so does
// the client's retry after the row itself was lost (a restore from a backup, a failover
// under asynchronous replication), which claims a new row for the same intent and meets the
// provider's first charge instead of charging again (docs/recovery.md, "Provider keys").
// A row claimed before keeps the old derivation, from its id and created_at, until it
// ends: its charge may stand at the provider under that key.
func providerKey(step string, k *Key) string {
	h := sha256.New()
	if k.Intent != nil {
		fmt.Fprintf(h, "%s\x00intent\x00%x", step, k.Intent)
	} else {
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%s\x00%d", step, k.ID, k.ClientID, k.Key, k.CreatedAt.UnixMicro())
	}
	return "tekrar_" + step[:2] + "_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// ChargeKey is the provider key of k's charge (providerKey's "charge" step): a charge made
// under it is the order's own, whoever finds it (reconciliation).
func ChargeKey(k *Key) string { return providerKey("charge", k) }

// intentOf is what a claim stores as the key row's intent: the SHA-256 of the client, the
// client's key and what the request is (its scope fingerprint, or on a route without one
// its exact fingerprint). Every retry the key row would answer has the row's intent, a lost
// row's retry included, and a request of another client, key or scope has another. The key
// is length-prefixed: no choice of key can make two intents' inputs alike.
func intentOf(k *Key) []byte {
	what := k.ScopeFingerprint
	if what == nil {
		what = k.Fingerprint
	}
	h := sha256.New()
	fmt.Fprintf(h, "tekrar intent 1\x00%d\x00%d:%s\x00%x", k.ClientID, len(k.Key), k.Key, what)
	return h.Sum(nil)
}

// keyClaim is the key row a claim inserts (or finds a tombstone for), the part of its
// parameters that every keyed claim shares: now is CreatedAt, which a tombstone must outlive
// to refuse the claim.
type keyClaim struct {
	ClientID    int64  `db:"client_id"`
	Key         string `db:"key"`
	Fingerprint []byte `db:"fingerprint"`
	// What the route's spec covers (fingerprint_scope.go); nil and NULL for none.
	ScopeFingerprint []byte         `db:"scope_fingerprint"`
	CardFingerprint  sql.NullString `db:"card_fingerprint"`
	Method           string         `db:"method"`
	Path             string         `db:"path"`
	LeaseExpiresAt   sql.NullTime   `db:"lease_expires_at"`
	CreatedAt        time.Time      `db:"created_at"` // also now
	ExpiresAt        time.Time      `db:"expires_at"`
	// Intent is intentOf the key: its provider keys derive from it (providerKey). The
	// claim stores NULL instead (the row's own derivation) when tekrar still holds what
	// IntentKey, the intent's key for the claim's step, was used for (orderIntentSQL).
	Intent    []byte `db:"intent"`
	IntentKey string `db:"intent_key"`
}

// claimOf is the key row of k as a claim of step ("charge", "refund") inserts it.
func claimOf(k *Key, step string) keyClaim {
	intent := intentOf(k)
	return keyClaim{ClientID: k.ClientID, Key: k.Key, Fingerprint: k.Fingerprint, Method: k.Method, Path: k.Path,
		ScopeFingerprint: k.ScopeFingerprint, CardFingerprint: k.CardFingerprint,
		LeaseExpiresAt: k.LeaseExpiresAt, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt,
		Intent: intent, IntentKey: providerKey(step, &Key{Intent: intent})}
}

// The claims' intent: a key forgotten by tekrar (swept, its tombstone ended) and reused by
// the client for a request with the same scope has the intent of the key's first request,
// and the provider, which may remember that request's provider key for longer, would answer
// the new request with the first one's charge or refund. The first request is still in
// tekrar when its payment, its refund or the compensation of its canceled charge names that
// key (a lost row's retry finds none of them: they were lost with the row, or never made):
// the new row then derives its provider keys from itself, as rows did before there were
// intents, and the request is the new intent the docs promise. Each test is one probe of a
// unique index.
const (
	orderIntentSQL = `CASE WHEN EXISTS (SELECT 1 FROM payments WHERE provider_key = :intent_key)
	                       OR EXISTS (SELECT 1 FROM compensations WHERE charge_key = :intent_key)
	                  THEN NULL ELSE CAST(:intent AS bytea) END`
	refundIntentSQL = `CASE WHEN EXISTS (SELECT 1 FROM refunds WHERE provider_key = :intent_key)
	                   THEN NULL ELSE CAST(:intent AS bytea) END`
)

// orderClaim is the parameters of claimOrder: the key row it inserts and the pending order.
type orderClaim struct {
	keyClaim
	Amount        int64          `db:"amount"`
	Currency      string         `db:"currency"`
	Items         string         `db:"items"` // JSON, as text: see nullJSON
	CustomerID    sql.NullString `db:"customer_id"`
	CustomerEmail sql.NullString `db:"customer_email"`
	Metadata      sql.NullString `db:"metadata"` // JSON, as text
	// The stockLines, column by column; nil (NULL) for none.
	StockSKUs       pq.StringArray `db:"stock_skus"`
	StockQuantities pq.Int64Array  `db:"stock_quantities"`
	StockPrices     pq.Int64Array  `db:"stock_prices"`
	// The installment plan: the count (1: none), the saved card, and the installments
	// column by column (nil for none; dates as text, see planParams).
	Installments    int64          `db:"installments"`
	PaymentCustomer sql.NullString `db:"payment_customer"`
	PaymentMethod   sql.NullString `db:"payment_method"`
	InstAmounts     pq.Int64Array  `db:"inst_amounts"`
	InstDueOn       pq.StringArray `db:"inst_due_on"`
	InstDueAt       pq.StringArray `db:"inst_due_at"`
}

// providerCustomerSQL is the customer a saved card is charged with, written by the claim:
// the client's stored prefix and the client's customer (customers.go); NULL for a card
// token, as :payment_customer is then.
const providerCustomerSQL = `(SELECT c.provider_customer_prefix || CAST(:payment_customer AS text) FROM clients c WHERE c.id = :client_id)`

// clientPrefixSQL reads the client's provider customer prefix, for a charge on a saved card:
// an order's claim wrote the same into the order, a register's sale keeps no saved card.
const clientPrefixSQL = `SELECT provider_customer_prefix FROM clients WHERE id = $1`

// claimKeyAndOrderSQL is what every order's claim does (claimOrder): the tombstone step t
// (keyed.TombstoneSQL), the key k and the pending order o. claimOrderSQL adds the steps of
// an order's installments and stock; claimPlainOrderSQL, for an order with neither, does not
// name their tables at all.
var claimKeyAndOrderSQL = `
	WITH t AS (` + keyed.TombstoneSQL + `
	), k AS (
	    INSERT INTO idempotency_keys
	           (client_id, key, fingerprint, method, path, state, recovery_point,
	            lease_expires_at, order_id, created_at, expires_at, scope_fingerprint, card_fingerprint, intent)
	    SELECT :client_id, :key, CAST(:fingerprint AS bytea), :method, :path, 'in_progress', 'order_created',
	           :lease_expires_at, nextval('orders_id_seq'), :created_at, :expires_at,
	           CAST(:scope_fingerprint AS bytea), :card_fingerprint, ` + orderIntentSQL + `
	     WHERE NOT EXISTS (SELECT 1 FROM t)
	    ON CONFLICT (client_id, key) DO NOTHING
	    RETURNING ` + keyed.Columns + `
	), o AS (
	    INSERT INTO orders (id, client_id, status, amount, currency, items, customer_id,
	                        customer_email, metadata, created_at, updated_at,
	                        installments, payment_customer, payment_method, provider_customer, intent)
	    SELECT k.order_id, :client_id, 'pending', :amount, :currency, :items, :customer_id,
	           :customer_email, :metadata, :created_at, :created_at,
	           :installments, :payment_customer, :payment_method, ` + providerCustomerSQL + `, k.intent FROM k
	    RETURNING public_id
	)`

// claimOrderSQL: see claimOrder.
var claimOrderSQL = named[orderClaim](claimKeyAndOrderSQL + `, i AS (
	    INSERT INTO installments (order_id, n, amount, due_on, due_at, next_attempt_at, updated_at)
	    SELECT k.order_id, x.n, x.amount, x.due_on, x.due_at, x.due_at, :created_at
	      FROM k, unnest(CAST(:inst_amounts AS bigint[]), CAST(:inst_due_on AS date[]),
	                     CAST(:inst_due_at AS timestamptz[])) WITH ORDINALITY AS x(amount, due_on, due_at, n)
	), w AS (
	    SELECT w.sku, w.quantity, w.unit_amount
	      FROM unnest(CAST(:stock_skus AS text[]), CAST(:stock_quantities AS bigint[]),
	                  CAST(:stock_prices AS bigint[])) AS w(sku, quantity, unit_amount)
	), s AS (
	    UPDATE products p
	       SET stock = p.stock - w.quantity, version = p.version + 1, updated_at = :created_at
	      FROM w, k
	     WHERE p.client_id = :client_id AND p.sku = w.sku AND p.stock >= w.quantity
	       AND p.price = w.unit_amount AND p.currency = :currency
	    RETURNING p.id, w.quantity, k.order_id
	), m AS (
	    INSERT INTO stock_movements (product_id, delta, reason, order_id, created_at)
	    SELECT s.id, -s.quantity, 'sale', s.order_id, :created_at FROM s
	)
	SELECT k.*, CAST(o.public_id AS text) AS order_public_id, '' AS refund_public_id FROM k, o
	 WHERE refuse_short_stock((SELECT count(*) FROM w) - (SELECT count(*) FROM s))
	UNION ALL SELECT * FROM t`)

// claimPlainOrderSQL is claimOrderSQL for an order with no installments and no stock lines,
// which most card orders are: without the steps that would find nothing to write. A plan
// that names a table opens and locks it, and every one of its indexes, at each run, whether
// a row comes or not; measured, the plain claim and completion (completePaidOrderSQL) gave
// 1.09-1.13 times the first arrivals a second (docs/performance.md).
var claimPlainOrderSQL = named[orderClaim](claimKeyAndOrderSQL + `
	SELECT k.*, CAST(o.public_id AS text) AS order_public_id, '' AS refund_public_id FROM k, o
	UNION ALL SELECT * FROM t`)

// plain reports whether the order p claims has neither installments nor stock lines, for
// claimPlainOrderSQL.
func (p *orderClaim) plain() bool { return len(p.InstAmounts) == 0 && len(p.StockSKUs) == 0 }

// claimOrder inserts the key row and its pending order in one statement, so the two commit
// together or not at all. ON CONFLICT DO NOTHING on (client_id, key) decides which of many
// concurrent first arrivals wins; the losers get keyed.ErrNoKey and look the key up again. A key
// with a live tombstone (swept, still in its grace period) is not claimed: the tombstone
// comes back instead, as a Key with Tombstone set.
//
// The order's public id (what the client sees) is the default of orders.public_id, random,
// made by this statement and returned with the key.
//
// The order id comes from the identity sequence of orders.id, named as Postgres names it
// (orders_id_seq): a constant name is resolved once per prepared statement, where
// pg_get_serial_sequence looked it up in the catalogue at every claim.
//
// It runs after a look-up found no key. Folding the look-up into this statement would save
// the first arrival a round trip but make every replay an INSERT statement, which opens and
// locks both tables and all their indexes: measured, replays then ran at half the rate.
//
// The fingerprint is cast to bytea because its column is a domain (sha256_digest): without
// binary parameters, lib/pq sends a []byte as raw text to any parameter not typed bytea.
//
// Stock: the order's from_stock lines (w, summed per sku, passed as three arrays: the
// planner estimates an array parameter at 10 elements, where it takes a JSON document's
// recordset for 100, and at 100 the generic plan read all the client's products into a
// hash instead of looking each one up; TestStockClaimUsesTheProductKey) are taken from their products
// (s) only when the key was claimed (s joins k), and each take is a movement (m). A
// product's UPDATE waits for the row lock of any concurrent sale and re-checks
// stock >= quantity on the level that sale left, so of many claims on the last units only
// as many pass as there are units. When a line could not be taken (short, priced
// otherwise, no such product) s has fewer rows than w, and refuse_short_stock raises: the
// statement fails as a whole, the key row, the order and the takes of the other lines
// with it, and claimOrder returns errShortStock. The check is a condition on the claimed
// row of k and o: a replay or a tombstone has no row there, and nothing is refused (nothing
// was taken either); the function is volatile, so the planner cannot hoist it into a
// one-time filter evaluated without that row. An order without from_stock lines passes NULL:
// w and s are empty, and the check passes. CHECK products_stock_not_negative is the last
// line of defence: should the statement ever take more than there is, the CHECK fails it
// as a whole, and that is out of stock too (isShortStock).
func claimOrder(ctx context.Context, db sqlx.QueryerContext, p orderClaim) (_ *Key, claimed bool, _ error) {
	claim := claimOrderSQL
	if p.plain() {
		claim = claimPlainOrderSQL
	}
	var row Key
	err := claim.get(ctx, db, &row, p)
	for try := 1; isDeadlock(err) && try < 3; try++ {
		err = claim.get(ctx, db, &row, p) // rolled back whole: safe to run again
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, keyed.ErrNoKey
	case isShortStock(err):
		return nil, false, errShortStock
	case err != nil:
		return nil, false, fmt.Errorf("claim key and create order: %w", err)
	}
	return &row, !row.Tombstone, nil
}

// orderSettlement is the parameters of completeOrderSQL.
type orderSettlement struct {
	keyed.SetState
	OrderStatus    string         `db:"order_status"`
	Captured       int64          `db:"captured_amount"`
	ChargeID       string         `db:"provider_charge_id"`
	ProviderKey    string         `db:"provider_key"`
	ChargeAmount   int64          `db:"charge_amount"`
	ChargeCurrency string         `db:"charge_currency"`
	ChargeStatus   string         `db:"charge_status"`
	DeclineCode    sql.NullString `db:"decline_code"`
	CardBrand      sql.NullString `db:"card_brand"`
	CardLast4      sql.NullString `db:"card_last4"`
}

// settleKeyAndOrderSQL is what every order's completion does (completeOrder): the key k, the
// order o, its event e and its payment p. Each later step reads the key's order_id from k,
// so it does nothing when the fence matched no row. completeOrderSQL adds the steps of an
// order's installments and of the stock a declined order gives back; completePaidOrderSQL,
// for a paid order with no installments, for which they would find nothing, does not.
var settleKeyAndOrderSQL = `
	WITH k AS (` + keyed.SetStateSQL + `
	    RETURNING order_id
	), o AS (
	    UPDATE orders SET status = :order_status, captured_amount = :captured_amount, updated_at = :now
	     WHERE id = (SELECT order_id FROM k)
	    RETURNING id, client_id, public_id, status, amount, currency
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    SELECT o.client_id, CASE o.status WHEN 'paid' THEN ` + outbox.TypeSQL(outbox.OrderPaid) + ` ELSE ` + outbox.TypeSQL(outbox.OrderDeclined) + ` END, o.id,
	           CASE o.status WHEN 'paid' THEN ` + orderPayloadSQL + `
	                ELSE ` + orderPayloadSQL + ` || jsonb_build_object('decline_code', CAST(:decline_code AS text)) END,
	           :now
	      FROM o WHERE o.status IN ('paid', 'declined')
	), e AS (` + outbox.InsertSQL + `
	), p AS (
	    INSERT INTO payments (order_id, provider_charge_id, provider_key, amount, currency,
	                          status, decline_code, card_brand, card_last4, created_at)
	    SELECT k.order_id, :provider_charge_id, :provider_key, :charge_amount, :charge_currency,
	           :charge_status, :decline_code, :card_brand, :card_last4, :now FROM k
	)`

// completeOrderSQL: see completeOrder.
var completeOrderSQL = named[orderSettlement](settleKeyAndOrderSQL + `, i AS (
	    -- An installment plan (the order's charge is its first installment); a decline
	    -- cancels the plan.
	    UPDATE installments
	       SET status = CASE WHEN :charge_status = 'succeeded' THEN 'paid' ELSE 'canceled' END,
	           next_attempt_at = NULL,
	           attempts = CASE WHEN n = 1 THEN 1 ELSE attempts END,
	           provider_key = CASE WHEN n = 1 THEN CAST(:provider_key AS text) END,
	           provider_charge_id = CASE WHEN :charge_status = 'succeeded' THEN CAST(:provider_charge_id AS text) END,
	           decline_code = CASE WHEN n = 1 THEN CAST(:decline_code AS text) END,
	           paid_at = CASE WHEN :charge_status = 'succeeded' THEN CAST(:now AS timestamptz) END,
	           updated_at = :now
	     WHERE order_id = (SELECT order_id FROM k) AND (n = 1 OR :charge_status <> 'succeeded')
	), ` + releaseStockSQL + `
	SELECT count(*) FROM k`)

// completePaidOrderSQL is completeOrderSQL for a paid order with no installments: no
// installment to settle, and a paid order gives no stock back (releaseStockSQL takes only
// from orders in UnchargedStatuses). See claimPlainOrderSQL.
var completePaidOrderSQL = named[orderSettlement](settleKeyAndOrderSQL + `
	SELECT count(*) FROM k`)

// orderPayloadSQL is the data every order event starts with, from a row o of orders (or a
// CTE returning its columns): docs/outbox.md.
const orderPayloadSQL = `jsonb_build_object('order', o.public_id, 'status', o.status, 'amount', o.amount, 'currency', o.currency)`

// completeOrder records the charge, settles the order and stores the response, all fenced
// by the lease token: if the key was taken over meanwhile, nothing is written, no event
// either. The event (order.paid or order.declined) is written by the same statement, and a
// declined order gives back the stock it took in it (releaseStockSQL).
//
// plan is the order's installment count (1: none), which with status picks the statement.
func completeOrder(ctx context.Context, db sqlx.QueryerContext, k *Key, resp Response, now time.Time,
	status string, plan int, captured int64, ch psp.Charge, pk string) error {
	kc, err := keyed.Complete(k, resp, now)
	if err != nil {
		return err
	}
	// The key keeps the card its charge's answer names: a first arrival did not look it up.
	card := ch.CardFingerprint
	if card == "" && k.CardFingerprint.Valid {
		card = k.CardFingerprint.String
	}
	kc = kc.WithCard(card)
	settle := completeOrderSQL
	if status == StatusPaid && plan <= 1 {
		settle = completePaidOrderSQL
	}
	var n int
	err = retryDeadlock(db, func() error {
		return settle.get(ctx, db, &n, orderSettlement{SetState: kc,
			OrderStatus: status, Captured: captured,
			ChargeID: ch.ID, ProviderKey: pk, ChargeAmount: ch.Amount, ChargeCurrency: ch.Currency, ChargeStatus: ch.Status,
			DeclineCode: nullString(ch.DeclineCode), CardBrand: nullString(ch.CardBrand), CardLast4: nullString(ch.CardLast4)})
	})
	if err != nil {
		return fmt.Errorf("complete order: %w", err)
	}
	if n == 0 {
		return keyed.ErrFenced
	}
	return nil
}

// nullJSON passes a JSON document as text, NULL when empty: with binary parameters on,
// []byte would be sent as binary jsonb, which has a version byte that plain JSON lacks.
func nullJSON(b []byte) sql.NullString {
	return sql.NullString{String: string(b), Valid: len(b) > 0}
}

// orderIDSyntax is the shape of an order's public id: "ord_" and 32 lower-case hex digits,
// as the domain order_public_id (migrations/00013_public_ids.sql) says.
var orderIDSyntax = regexp.MustCompile(`^ord_[0-9a-f]{32}$`)

// ValidOrderID reports whether s has the shape of an order's public id, so that a path
// holding anything else (an internal integer id among them) is answered 404 without a query.
func ValidOrderID(s string) bool { return orderIDSyntax.MatchString(s) }

// order is a row of orders with its payment: the one shape checkout reads an order in,
// with orderSelect, whatever it reads it for (the API's views, a conflict's differences,
// an operator's refund). The payment's columns come from a LEFT JOIN: NULL (not Valid)
// while the order has none.
type order struct {
	ID             int64          `db:"id"`
	PublicID       string         `db:"public_id"`
	ClientID       int64          `db:"client_id"`
	Status         string         `db:"status"`
	Amount         int64          `db:"amount"`
	Currency       string         `db:"currency"`
	Items          []byte         `db:"items"`
	CustomerID     sql.NullString `db:"customer_id"`
	CustomerEmail  sql.NullString `db:"customer_email"`
	Metadata       []byte         `db:"metadata"`
	CapturedAmount int64          `db:"captured_amount"`
	RefundedAmount int64          `db:"refunded_amount"`
	CreatedAt      time.Time      `db:"created_at"`
	Installments   int            `db:"installments"`
	ChargeID       sql.NullString `db:"provider_charge_id"`
	PayStatus      sql.NullString `db:"pay_status"`
	DeclineCode    sql.NullString `db:"decline_code"`
	CardBrand      sql.NullString `db:"card_brand"`
	CardLast4      sql.NullString `db:"card_last4"`
}

// orderSelect reads orders; its callers add the WHERE clause.
const orderSelect = `
	SELECT o.id, o.public_id, o.client_id, o.status, o.amount, o.currency, o.items, o.customer_id,
	       o.customer_email, o.metadata, o.captured_amount, o.refunded_amount, o.created_at, o.installments,
	       p.provider_charge_id, p.status AS pay_status, p.decline_code, p.card_brand, p.card_last4
	  FROM orders o LEFT JOIN payments p ON p.order_id = o.id`

// itemsAndMetadata decodes what the order keeps of its request.
func (r *order) itemsAndMetadata() ([]Item, map[string]string, error) {
	var items []Item
	if err := json.Unmarshal(r.Items, &items); err != nil {
		return nil, nil, fmt.Errorf("order %d items: %w", r.ID, err)
	}
	var metadata map[string]string
	if len(r.Metadata) > 0 {
		if err := json.Unmarshal(r.Metadata, &metadata); err != nil {
			return nil, nil, fmt.Errorf("order %d metadata: %w", r.ID, err)
		}
	}
	return items, metadata, nil
}

func (r *order) view() (OrderView, error) {
	v := OrderView{ID: r.PublicID, Status: r.Status, Amount: r.Amount, Currency: r.Currency,
		RefundedAmount: r.RefundedAmount, CreatedAt: r.CreatedAt.UTC(), plan: r.Installments}
	var err error
	if v.Items, v.Metadata, err = r.itemsAndMetadata(); err != nil {
		return OrderView{}, err
	}
	if r.CustomerID.Valid || r.CustomerEmail.Valid {
		v.Customer = &Customer{ID: r.CustomerID.String, Email: r.CustomerEmail.String}
	}
	if r.ChargeID.Valid {
		v.Payment = &PaymentView{ID: r.ChargeID.String, Status: r.PayStatus.String, DeclineCode: r.DeclineCode.String,
			CardBrand: r.CardBrand.String, CardLast4: r.CardLast4.String}
	}
	return v, nil
}

// getOrder reads one order; where is a constant condition on orders o, such as
// "o.id = $1" (the texts stay few, and each is prepared once).
func getOrder(ctx context.Context, db sqlx.QueryerContext, where string, args ...any) (order, error) {
	var r order
	err := sqlx.GetContext(ctx, db, &r, orderSelect+` WHERE `+where, args...)
	return r, err
}

// ErrOrderNotFound is an order that does not exist or belongs to another client: the two
// are indistinguishable to a client by design. Every order_not_found problem is it
// (errors.Is); a shared value, never modified (Advised copies).
var ErrOrderNotFound error = problem.Of(problem.CodeOrderNotFound)

// GetOrder returns one of the client's orders by its public id. Anything that is not an
// order id (an integer, another prefix) is not found, without a query.
func (s *Service) GetOrder(ctx context.Context, clientID int64, publicID string) (OrderView, error) {
	if !ValidOrderID(publicID) {
		return OrderView{}, ErrOrderNotFound
	}
	r, err := getOrder(ctx, s.db, `o.public_id = $1 AND o.client_id = $2`, publicID, clientID)
	if errors.Is(err, sql.ErrNoRows) {
		return OrderView{}, ErrOrderNotFound
	}
	if err != nil {
		return OrderView{}, fmt.Errorf("get order: %w", err)
	}
	v, err := r.view()
	if err != nil {
		return OrderView{}, err
	}
	if err := s.withInstallments(ctx, &v, r.ID); err != nil {
		return OrderView{}, err
	}
	return v, nil
}

// ErrBadCursor is an `after` that is not an order of the listed customer of the client.
var ErrBadCursor = errors.New("after is not an order of this list")

// ListOrders returns a page of the client's orders for one customer, newest first, starting
// after the order whose public id is `after` ("": from the newest). Keyset pagination on
// the internal id, which the cursor order is looked up for: the cost of a page does not
// grow with how deep it is.
func (s *Service) ListOrders(ctx context.Context, clientID int64, customerID string, afterID string, limit int) ([]OrderView, bool, error) {
	after := int64(1<<63 - 1)
	if afterID != "" {
		if !ValidOrderID(afterID) {
			return nil, false, ErrBadCursor
		}
		err := sqlx.GetContext(ctx, s.db, &after, `
			SELECT id FROM orders WHERE public_id = $1 AND client_id = $2 AND customer_id = $3`,
			afterID, clientID, customerID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, ErrBadCursor
		}
		if err != nil {
			return nil, false, fmt.Errorf("list orders: cursor: %w", err)
		}
	}
	var rows []order
	err := sqlx.SelectContext(ctx, s.db, &rows, orderSelect+`
		 WHERE o.client_id = $1 AND o.customer_id = $2 AND o.id < $3
		 ORDER BY o.id DESC
		 LIMIT $4`, clientID, customerID, after, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list orders: %w", err)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := make([]OrderView, 0, len(rows))
	for i := range rows {
		v, err := rows[i].view()
		if err != nil {
			return nil, false, err
		}
		out = append(out, v)
	}
	return out, more, nil
}
