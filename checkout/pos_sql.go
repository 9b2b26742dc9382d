package checkout

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/outbox"
)

// upsertRegister creates the client's register on its first batch, renames it when a batch
// sends another name, and returns its id.
func upsertRegister(ctx context.Context, db sqlx.QueryerContext, clientID int64, r RegisterInput, now time.Time) (int64, error) {
	var id int64
	err := sqlx.GetContext(ctx, db, &id, `
		INSERT INTO registers (client_id, public_id, name, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (client_id, public_id) DO UPDATE SET name = EXCLUDED.name, updated_at = EXCLUDED.updated_at
		 WHERE registers.name <> EXCLUDED.name
		RETURNING id`, clientID, r.ID, r.Name, now)
	if err == sql.ErrNoRows { // there, with this name: nothing to update, nothing returned
		err = sqlx.GetContext(ctx, db, &id, `SELECT id FROM registers WHERE client_id = $1 AND public_id = $2`, clientID, r.ID)
	}
	if err != nil {
		return 0, fmt.Errorf("register %q: %w", r.ID, err)
	}
	return id, nil
}

// lookupKeys reads the keys of a batch, and the live tombstones of swept ones (as
// claimOrderSQL's t does), in one query: key → Key.
func lookupKeys(ctx context.Context, db sqlx.QueryerContext, clientID int64, keys []string, now time.Time) (map[string]*Key, error) {
	out := map[string]*Key{}
	if len(keys) == 0 {
		return out, nil
	}
	var rows []Key
	err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT `+keyed.Columns+`, '' AS order_public_id, '' AS refund_public_id
		  FROM idempotency_keys WHERE client_id = $1 AND key = ANY($2)
		UNION ALL
		SELECT 0, t.client_id, t.key, t.fingerprint, t.method, t.path, 'completed', 'finished', 0, NULL,
		       t.order_id, t.refund_id, NULL, NULL, NULL, NULL, t.first_seen, t.expired_at, NULL, true, '', ''
		  FROM key_tombstones t
		 WHERE t.client_id = $1 AND t.key = ANY($2) AND t.forget_at > $3`, clientID, pq.StringArray(keys), now)
	if err != nil {
		return nil, fmt.Errorf("look up the keys of a batch: %w", err)
	}
	for i := range rows {
		if _, ok := out[rows[i].Key]; !ok || !rows[i].Tombstone {
			out[rows[i].Key] = &rows[i]
		}
	}
	return out, nil
}

// storedSale is what Postgres holds of a sale whose key has its answer (saleAnswer): the
// key's stored response, and the units the sale oversold; Oversold is NULL for an order
// that has no register row (sent alone with POST /v1/orders, then in a batch).
type storedSale struct {
	Key      string        `db:"key"`
	Status   sql.NullInt32 `db:"response_status"`
	Body     []byte        `db:"response_body"`
	Oversold sql.NullInt64 `db:"oversold_units"`
}

// storedSales reads the stored answers of a batch's sales whose keys are completed, with
// what each sale oversold, in one query: key → storedSale.
func storedSales(ctx context.Context, db sqlx.QueryerContext, clientID int64, keys []string) (map[string]storedSale, error) {
	var rows []storedSale
	err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT k.key, k.response_status, k.response_body, s.oversold_units
		  FROM idempotency_keys k LEFT JOIN pos_sales s ON s.order_id = k.order_id
		 WHERE k.client_id = $1 AND k.key = ANY($2) AND k.state = 'completed'`, clientID, pq.StringArray(keys))
	if err != nil {
		return nil, fmt.Errorf("read the stored answers of a batch: %w", err)
	}
	out := make(map[string]storedSale, len(rows))
	for _, r := range rows {
		out[r.Key] = r
	}
	return out, nil
}

// claimSalesSQL inserts the key rows and orders of a chunk of sales in one statement, as
// claimOrderSQL does for one order: ON CONFLICT DO NOTHING on (client_id, key) lets a
// concurrent claim of the same key win (this statement waits for it to commit, then skips
// the key), and a live tombstone is not claimed. A sale paid at the register (a response
// given) is inserted completed, its order paid; a card_token sale is in_progress under a
// lease, its order pending, as the provider's charge is still to come. The keys are
// inserted in key order, so two chunks claiming overlapping keys wait for each other
// rather than deadlock.
const claimSalesSQL = `
	WITH i AS (
	    SELECT * FROM unnest(CAST($5 AS text[]), CAST($6 AS bytea[]), CAST($7 AS text[]), CAST($8 AS bigint[]),
	                         CAST($9 AS text[]), CAST($10 AS text[]), CAST($11 AS text[]), CAST($12 AS text[]),
	                         CAST($13 AS text[]), CAST($14 AS int[]), CAST($15 AS text[]), CAST($16 AS bytea[]),
	                         CAST($17 AS text[]), CAST($20 AS bytea[]), CAST($21 AS text[]))
	           AS i(key, fingerprint, public_id, amount, currency, items, customer_id, customer_email,
	                metadata, response_status, response_body, intent, intent_key, scope_fingerprint, card_fingerprint)
	), k AS (
	    INSERT INTO idempotency_keys
	           (client_id, key, fingerprint, method, path, state, recovery_point, lease_expires_at, order_id,
	            response_status, response_headers, response_body, created_at, completed_at, expires_at, intent,
	            scope_fingerprint, card_fingerprint)
	    SELECT $1, i.key, i.fingerprint, $18, $19,
	           CASE WHEN i.response_status IS NULL THEN 'in_progress' ELSE 'completed' END,
	           CASE WHEN i.response_status IS NULL THEN 'order_created' ELSE 'finished' END,
	           CASE WHEN i.response_status IS NULL THEN CAST($3 AS timestamptz) END,
	           nextval('orders_id_seq'), i.response_status,
	           CASE WHEN i.response_status IS NOT NULL THEN CAST('{"Content-Type":"application/json"}' AS jsonb) END,
	           CASE WHEN i.response_status IS NOT NULL THEN convert_to(i.response_body, 'UTF8') END, $2,
	           CASE WHEN i.response_status IS NOT NULL THEN CAST($2 AS timestamptz) END, $4,
	           -- orderIntentSQL's test: a forgotten key reused derives from its row
	           CASE WHEN EXISTS (SELECT 1 FROM payments p WHERE p.provider_key = i.intent_key)
	                  OR EXISTS (SELECT 1 FROM compensations c WHERE c.charge_key = i.intent_key)
	                THEN NULL ELSE i.intent END,
	           -- an empty scope is a sale paid at the register, which has none
	           NULLIF(i.scope_fingerprint, CAST('' AS bytea)), i.card_fingerprint
	      FROM i
	     WHERE NOT EXISTS (SELECT 1 FROM key_tombstones t WHERE t.client_id = $1 AND t.key = i.key AND t.forget_at > $2)
	     ORDER BY i.key
	    ON CONFLICT (client_id, key) DO NOTHING
	    RETURNING ` + keyed.Columns + `
	), o AS (
	    INSERT INTO orders (id, public_id, client_id, status, amount, currency, items, customer_id,
	                        customer_email, metadata, captured_amount, created_at, updated_at, intent)
	    SELECT k.order_id, i.public_id, $1, CASE WHEN i.response_status IS NULL THEN 'pending' ELSE 'paid' END,
	           i.amount, i.currency, CAST(i.items AS jsonb), i.customer_id, i.customer_email,
	           CAST(i.metadata AS jsonb), CASE WHEN i.response_status IS NULL THEN 0 ELSE i.amount END, $2, $2, k.intent
	      FROM k JOIN i ON i.key = k.key
	    RETURNING id, public_id
	)
	SELECT k.*, CAST(o.public_id AS text) AS order_public_id, '' AS refund_public_id FROM k JOIN o ON o.id = k.order_id`

// saleStockSQL takes what the claimed sales of a chunk sold from their products (one
// UPDATE per product, its takes summed; a take stops at the level), records each take as a
// movement, the register's part of each sale (pos_sales, with the units oversold) and the
// order.paid event of each sale paid at the register.
var saleStockSQL = `
	WITH u AS (
	    UPDATE products p SET stock = p.stock - u.take, version = p.version + 1, updated_at = $1
	      FROM unnest(CAST($2 AS bigint[]), CAST($3 AS bigint[])) AS u(id, take)
	     WHERE p.id = u.id
	), m AS (
	    INSERT INTO stock_movements (product_id, delta, reason, order_id, created_at)
	    SELECT m.product_id, -m.take, 'sale', m.order_id, $1
	      FROM unnest(CAST($4 AS bigint[]), CAST($5 AS bigint[]), CAST($6 AS bigint[])) AS m(product_id, take, order_id)
	), s AS (
	    INSERT INTO pos_sales (order_id, register_id, sold_at, received_at, oversold_units)
	    SELECT s.order_id, $7, s.sold_at, $1, s.oversold
	      FROM unnest(CAST($8 AS bigint[]), CAST($9 AS timestamptz[]), CAST($10 AS bigint[])) AS s(order_id, sold_at, oversold)
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    SELECT o.client_id, ` + outbox.TypeSQL(outbox.OrderPaid) + `, o.id, ` + orderPayloadSQL + `, $1
	      FROM orders o WHERE o.id = ANY(CAST($11 AS bigint[]))
	)` + outbox.InsertSQL

// stockLevel is a product a chunk sells, locked.
type stockLevel struct {
	ID    int64  `db:"id"`
	SKU   string `db:"sku"`
	Stock int64  `db:"stock"`
}

// claimSalesRetry is claimSales, run again when Postgres broke a deadlock with a
// concurrent order's claim (it takes keys, then products; a chunk products, then keys):
// the transaction rolled back whole.
func (s *Service) claimSalesRetry(ctx context.Context, c clients.Client, registerID int64, ws []*saleWork, now time.Time) (map[string]*Key, error) {
	var claimed map[string]*Key
	var err error
	for try := 0; try < 3; try++ {
		err = inTx(ctx, s.db, "claim sales", func(tx *sqlx.Tx) error {
			claimed, err = s.claimSales(ctx, tx, c, registerID, ws, now)
			return err
		})
		if !isDeadlock(err) {
			break
		}
	}
	return claimed, err
}

// claimSales claims a chunk of sales in tx: it locks their products (in id order), refuses
// the sales naming a product the client does not have (w.invalid), claims the keys and
// orders of the rest (claimSalesSQL), and takes their stock in input order. A sale that
// already happened is never refused for stock: each line takes what is left, down to 0,
// and the rest is the sale's oversold units. It returns the keys it claimed.
func (s *Service) claimSales(ctx context.Context, tx *sqlx.Tx, c clients.Client, registerID int64, ws []*saleWork, now time.Time) (map[string]*Key, error) {
	// The answer stored with a sale paid at the register names its order's created_at: now
	// is taken as Postgres keeps a time, to the microsecond, so that the answer and the order
	// carry one time (Postgres would round the nanoseconds of the answer's away).
	now = now.Truncate(time.Microsecond)
	skus := map[string]bool{}
	for _, w := range ws {
		w.invalid, w.oversold = nil, 0
		for _, l := range w.lines {
			skus[l.SKU] = true
		}
	}
	level := map[string]*stockLevel{}
	if len(skus) > 0 {
		list := make([]string, 0, len(skus))
		for sku := range skus {
			list = append(list, sku)
		}
		var rows []stockLevel
		if err := tx.SelectContext(ctx, &rows, `
			SELECT id, sku, stock FROM products WHERE client_id = $1 AND sku = ANY($2) ORDER BY id FOR UPDATE`,
			c.ID, pq.StringArray(list)); err != nil {
			return nil, fmt.Errorf("lock the products of a batch: %w", err)
		}
		for i := range rows {
			level[rows[i].SKU] = &rows[i]
		}
	}
	var (
		keys, publicIDs, currencies, items, bodies, intentKeys []string
		customerIDs, customerEmails, metadata                  []sql.NullString
		fps, intents, scopes                                   pq.ByteaArray
		cards                                                  []sql.NullString
		amounts                                                []int64
		statuses                                               []sql.NullInt64
		byKey                                                  = map[string]*saleWork{}
	)
	for _, w := range ws {
		for _, l := range w.lines {
			if level[l.SKU] == nil {
				w.invalid = outOfCatalogue(l.SKU)
			}
		}
		if w.invalid != nil {
			continue
		}
		in := w.sale.Order
		w.publicID = newOrderPublicID()
		it, err := jsonText(in.Items)
		if err != nil {
			return nil, err
		}
		var md sql.NullString
		if len(in.Metadata) > 0 {
			if md.String, err = jsonText(in.Metadata); err != nil {
				return nil, err
			}
			md.Valid = true
		}
		status, body := sql.NullInt64{}, ""
		if w.paidAtClaim() {
			if w.response, err = cashAnswer(w, now); err != nil {
				return nil, err
			}
			status, body = sql.NullInt64{Int64: int64(w.response.Status), Valid: true}, string(w.response.Body)
		}
		var cid, cemail sql.NullString
		if in.Customer != nil {
			cid, cemail = nullString(in.Customer.ID), nullString(in.Customer.Email)
		}
		keys, publicIDs, currencies, items, bodies = append(keys, w.sale.Key), append(publicIDs, w.publicID),
			append(currencies, in.Currency), append(items, it), append(bodies, body)
		customerIDs, customerEmails, metadata = append(customerIDs, cid), append(customerEmails, cemail), append(metadata, md)
		fps, amounts, statuses = append(fps, w.fp[:]), append(amounts, in.Amount), append(statuses, status)
		ic := claimOf(&Key{ClientID: c.ID, Key: w.sale.Key, Fingerprint: w.fp[:]}, "charge")
		intents, intentKeys = append(intents, ic.Intent), append(intentKeys, ic.IntentKey)
		scopes, cards = append(scopes, w.scope), append(cards, w.card)
		byKey[w.sale.Key] = w
	}
	claimed := map[string]*Key{}
	if len(keys) == 0 {
		return claimed, nil
	}
	var rows []Key
	err := tx.SelectContext(ctx, &rows, claimSalesSQL, c.ID, now, now.Add(s.cfg.Lease), now.Add(c.KeyTTL),
		pq.StringArray(keys), fps, pq.StringArray(publicIDs), pq.Int64Array(amounts), pq.StringArray(currencies),
		pq.StringArray(items), pq.Array(customerIDs), pq.Array(customerEmails), pq.Array(metadata),
		pq.Array(statuses), pq.StringArray(bodies), intents, pq.StringArray(intentKeys),
		s.cfg.Routes.Order.Method, s.cfg.Routes.Order.Route, scopes, pq.Array(cards))
	if err != nil {
		return nil, fmt.Errorf("claim sales: %w", err)
	}
	for i := range rows {
		claimed[rows[i].Key] = &rows[i]
	}

	// Stock, in input order: an earlier sale of the register takes first.
	take := map[int64]int64{}
	var mProducts, mTakes, mOrders, sOrders, sOversold, paid []int64
	var sSoldAt []string
	for _, w := range ws {
		k, ok := claimed[w.sale.Key]
		if !ok {
			continue
		}
		for _, l := range w.lines {
			p := level[l.SKU]
			t := min(l.Quantity, p.Stock)
			p.Stock -= t
			w.oversold += l.Quantity - t
			if t > 0 {
				take[p.ID] += t
				mProducts, mTakes, mOrders = append(mProducts, p.ID), append(mTakes, t), append(mOrders, k.OrderID.Int64)
			}
		}
		sOrders, sOversold = append(sOrders, k.OrderID.Int64), append(sOversold, w.oversold)
		sSoldAt = append(sSoldAt, w.soldAt.UTC().Format(time.RFC3339Nano))
		if w.paidAtClaim() {
			paid = append(paid, k.OrderID.Int64)
		}
	}
	var uIDs, uTakes []int64
	for id, t := range take {
		uIDs, uTakes = append(uIDs, id), append(uTakes, t)
	}
	if _, err := tx.ExecContext(ctx, saleStockSQL, now, pq.Int64Array(uIDs), pq.Int64Array(uTakes),
		pq.Int64Array(mProducts), pq.Int64Array(mTakes), pq.Int64Array(mOrders), registerID,
		pq.Int64Array(sOrders), pq.StringArray(sSoldAt), pq.Int64Array(sOversold), pq.Int64Array(paid)); err != nil {
		return nil, fmt.Errorf("take the stock of sales: %w", err)
	}
	return claimed, nil
}

// recordArrival counts a batch's arrival for the console's resend statistics.
func recordArrival(ctx context.Context, db sqlx.ExecerContext, registerID int64, batchKey string, out []SaleOutcome, now time.Time) error {
	var created, replayed, refused int
	for _, o := range out {
		switch o.Outcome {
		case SaleCreated:
			created++
		case SaleReplayed:
			replayed++
		default:
			refused++
		}
	}
	_, err := db.ExecContext(ctx, `
		INSERT INTO pos_batch_arrivals (register_id, batch_key, sales, created, replayed, refused, received_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, registerID, batchKey, len(out), created, replayed, refused, now)
	return err
}
