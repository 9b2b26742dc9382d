package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/fields"
	"github.com/tekrar/tekrar/checkout/money"
	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/pgtext"
	"github.com/tekrar/tekrar/internal/problem"
)

// ProductInput is the body of PUT /v1/products/{sku}: the whole product, replaced. stock
// is the level to set; a PUT is how a client counts its shelf, and If-Match is how it
// makes sure no sale happened since it read the level it corrects.
type ProductInput struct {
	Name     string `json:"name"`
	Price    int64  `json:"price" tekrar:"required"`
	Currency string `json:"currency"`
	Stock    int64  `json:"stock" tekrar:"required"`
}

// MaxStock bounds a product's level, so that no sum of levels and quantities overflows.
const MaxStock = 1_000_000_000

// ValidSKU reports whether s can be a product's sku: 1 to 64 characters Postgres can store.
func ValidSKU(s string) bool { return s != "" && len(s) <= 64 && pgtext.Valid(s) }

// Validate lists every problem with the input; sku is the path's.
func (in *ProductInput) Validate(sku string) []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !ValidSKU(sku) {
		add("sku", "must be 1 to 64 characters, without U+0000")
	}
	if in.Name == "" || len(in.Name) > 200 {
		add("name", "must be 1 to 200 characters")
	} else if !pgtext.Valid(in.Name) {
		add("name", fields.NoNUL)
	}
	if in.Price < 0 || in.Price > money.MaxAmount {
		add("price", "must be between 0 and %d minor units", int64(money.MaxAmount))
	}
	if !money.ValidCurrency(in.Currency) {
		add("currency", "must be an upper-case ISO 4217 code such as TRY or EUR")
	}
	if in.Stock < 0 || in.Stock > MaxStock {
		add("stock", "must be between 0 and %d", MaxStock)
	}
	return errs
}

// ProductView is a product as the API shows it. Its version is the ETag header's.
type ProductView struct {
	SKU       string    `json:"sku"`
	Name      string    `json:"name"`
	Price     int64     `json:"price"`
	Currency  string    `json:"currency"`
	Stock     int64     `json:"stock"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ErrProductNotFound is a sku the client has no product for; another client's is the same,
// by design. A shared value, never modified.
var ErrProductNotFound error = problem.Of(problem.CodeProductNotFound)

// PutProduct creates or replaces one of the client's products, if pre holds. A body equal
// to the current product changes nothing, not even the version: PUT is idempotent, and a
// replay of it is answered with the same ETag. A change of stock is recorded as a
// movement (reason put) in the same transaction. created reports a new product.
func (s *Store) PutProduct(ctx context.Context, clientID int64, sku string, in ProductInput, pre Precondition) (_ ProductView, created bool, _ error) {
	var out product
	err := tdb.InTx(ctx, s.db, "put product", func(tx *sqlx.Tx) error {
		now := s.now()
		// Two passes at most: a product created concurrently by another PUT between the
		// look-up and the insert is then read, locked, like any existing one.
		for range 2 {
			cur, err := lockProduct(ctx, tx, clientID, sku)
			if errors.Is(err, sql.ErrNoRows) {
				if !pre.holds(false, 0) {
					return errStale("product", false, 0)
				}
				out, err = insertProduct(ctx, tx, clientID, sku, in, now)
				if errors.Is(err, sql.ErrNoRows) {
					continue // created meanwhile: read it under its lock
				}
				created = err == nil
				return err
			}
			if err != nil {
				return err
			}
			if !pre.holds(true, cur.Version) {
				return errStale("product", true, cur.Version)
			}
			if cur.Name == in.Name && cur.Price == in.Price && cur.Currency == in.Currency && cur.Stock == in.Stock {
				out = cur
				return nil
			}
			out, err = updateProduct(ctx, tx, cur, in, now)
			return err
		}
		return fmt.Errorf("put product: %q neither found nor created", sku)
	})
	if err != nil {
		return ProductView{}, false, err
	}
	return out.view(), created, nil
}

// GetProduct returns one of the client's products.
func (s *Store) GetProduct(ctx context.Context, clientID int64, sku string) (ProductView, error) {
	if !ValidSKU(sku) {
		return ProductView{}, ErrProductNotFound
	}
	var p product
	err := sqlx.GetContext(ctx, s.db, &p, productSelect+` WHERE client_id = $1 AND sku = $2`, clientID, sku)
	if errors.Is(err, sql.ErrNoRows) {
		return ProductView{}, ErrProductNotFound
	}
	if err != nil {
		return ProductView{}, fmt.Errorf("get product: %w", err)
	}
	return p.view(), nil
}

// ListProducts returns a page of the client's products in sku order, starting after the
// sku `after` ("": from the first).
func (s *Store) ListProducts(ctx context.Context, clientID int64, after string, limit int) ([]ProductView, bool, error) {
	var rows []product
	err := sqlx.SelectContext(ctx, s.db, &rows, productSelect+`
		 WHERE client_id = $1 AND sku > $2 ORDER BY sku LIMIT $3`, clientID, after, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list products: %w", err)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := make([]ProductView, len(rows))
	for i := range rows {
		out[i] = rows[i].view()
	}
	return out, more, nil
}
