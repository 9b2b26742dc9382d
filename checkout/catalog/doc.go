// Package catalog keeps a client's products and carts: PUT, GET and list of products, PUT,
// GET and DELETE of carts, each PUT or DELETE conditional on the version it replaces
// (Precondition, ETag). The API's /v1/products and /v1/carts call it through a Store.
//
// # What it owns
//
// It writes two tables, with the statements in products_sql.go and carts.go:
//
//   - products: a PUT creates or replaces a product, whole, under its row lock, and bumps
//     its version when anything changed;
//   - carts: a PUT replaces a cart's items, a DELETE removes the cart;
//
// and, of stock_movements, the rows of reason put: a level a PUT set. Orders, sales and
// refunds take stock from products and give it back (with their own movements) in
// checkout's claims (checkout/stock.go), which lock the same rows: a PUT and a sale of one
// product wait for each other, so a PUT's If-Match compares against a level no sale changes
// meanwhile.
//
// # Why a package of its own
//
// The catalog is what an order reads, never what it decides: checkout imports it (an
// order's lines are its Item; BindCart reads a cart with CartItems; a refused claim reads
// its products with ReadProducts), and it imports nothing of checkout, so the rules of a
// product and a cart are read in one place, without the keyed engine around them. A PUT
// needs no Idempotency-Key: it is idempotent, and a body equal to the current one changes
// nothing, not even the version.
package catalog

import (
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/fields"
)

// Store reads and writes the catalog over one pool.
type Store struct {
	db  *sqlx.DB
	now func() time.Time
}

// New returns the catalog over db; now is the clock of created_at and updated_at (nil: the
// wall clock), so that tests that inject a clock into the app see it here too.
func New(db *sqlx.DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now}
}

// FieldError is one invalid field of a request (fields.Error), the type checkout and
// checkout/deliveries name alike.
type FieldError = fields.Error
