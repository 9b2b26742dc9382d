package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// product is a row of products: the one shape the catalog reads a product in, with
// productSelect.
type product struct {
	ID        int64     `db:"id"`
	ClientID  int64     `db:"client_id"`
	SKU       string    `db:"sku"`
	Name      string    `db:"name"`
	Price     int64     `db:"price"`
	Currency  string    `db:"currency"`
	Stock     int64     `db:"stock"`
	Version   int64     `db:"version"`
	CreatedAt time.Time `db:"created_at"`
	UpdatedAt time.Time `db:"updated_at"`
}

// productSelect reads products; its callers add the WHERE clause.
const productSelect = `
	SELECT id, client_id, sku, name, price, currency, stock, version, created_at, updated_at FROM products`

const productReturning = ` RETURNING id, client_id, sku, name, price, currency, stock, version, created_at, updated_at`

func (p *product) view() ProductView {
	return ProductView{SKU: p.SKU, Name: p.Name, Price: p.Price, Currency: p.Currency, Stock: p.Stock,
		Version: p.Version, CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
}

// lockProduct reads a product under its row lock, so that a PUT compares its precondition
// and writes against a level no sale changes meanwhile (a sale's claim queues on the lock).
func lockProduct(ctx context.Context, tx *sqlx.Tx, clientID int64, sku string) (product, error) {
	var p product
	err := tx.GetContext(ctx, &p, productSelect+` WHERE client_id = $1 AND sku = $2 FOR UPDATE`, clientID, sku)
	return p, err
}

// insertProduct creates a product and the movement of its first level; sql.ErrNoRows when
// a concurrent PUT created it first.
func insertProduct(ctx context.Context, tx *sqlx.Tx, clientID int64, sku string, in ProductInput, now time.Time) (product, error) {
	var p product
	err := tx.GetContext(ctx, &p, `
		INSERT INTO products (client_id, sku, name, price, currency, stock, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
		ON CONFLICT (client_id, sku) DO NOTHING`+productReturning,
		clientID, sku, in.Name, in.Price, in.Currency, in.Stock, now)
	if errors.Is(err, sql.ErrNoRows) {
		return product{}, err
	}
	if err != nil {
		return product{}, fmt.Errorf("create product: %w", err)
	}
	return p, putMovement(ctx, tx, p.ID, p.Stock, now)
}

// updateProduct replaces a locked product's fields, bumps its version and records the
// change of level.
func updateProduct(ctx context.Context, tx *sqlx.Tx, cur product, in ProductInput, now time.Time) (product, error) {
	var p product
	err := tx.GetContext(ctx, &p, `
		UPDATE products SET name = $2, price = $3, currency = $4, stock = $5, version = version + 1, updated_at = $6
		 WHERE id = $1`+productReturning,
		cur.ID, in.Name, in.Price, in.Currency, in.Stock, now)
	if err != nil {
		return product{}, fmt.Errorf("update product: %w", err)
	}
	return p, putMovement(ctx, tx, p.ID, p.Stock-cur.Stock, now)
}

// putMovement records a level set by a PUT, when it changed.
func putMovement(ctx context.Context, tx *sqlx.Tx, productID, delta int64, now time.Time) error {
	if delta == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `
		INSERT INTO stock_movements (product_id, delta, reason, created_at) VALUES ($1, $2, 'put', $3)`,
		productID, delta, now)
	if err != nil {
		return fmt.Errorf("record stock movement: %w", err)
	}
	return nil
}

// ReadProducts reads the client's products of the given skus, in no order; a sku with no
// product is left out. checkout reads them to say why an order's claim could not take its
// lines from stock.
func ReadProducts(ctx context.Context, db sqlx.QueryerContext, clientID int64, skus []string) ([]ProductView, error) {
	var rows []product
	if err := sqlx.SelectContext(ctx, db, &rows, productSelect+` WHERE client_id = $1 AND sku = ANY($2)`,
		clientID, pq.Array(skus)); err != nil {
		return nil, fmt.Errorf("read products: %w", err)
	}
	out := make([]ProductView, len(rows))
	for i := range rows {
		out[i] = rows[i].view()
	}
	return out, nil
}
