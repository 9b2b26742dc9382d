package report

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Product is one client's product with its stock level, as the console lists it.
type Product struct {
	ClientID   int64     `db:"client_id"`
	ClientName string    `db:"client_name"`
	SKU        string    `db:"sku"`
	Name       string    `db:"name"`
	Price      int64     `db:"price"`
	Currency   string    `db:"currency"`
	Stock      int64     `db:"stock"`
	Version    int64     `db:"version"`
	UpdatedAt  time.Time `db:"updated_at"`
}

// Movement is one change of a product's level and what caused it: a sale (its order), a
// refund's restock (its refund and order), or a PUT (neither).
type Movement struct {
	ID             int64     `db:"id"`
	Delta          int64     `db:"delta"`
	Reason         string    `db:"reason"`
	OrderPublicID  *string   `db:"order_public_id"`
	RefundPublicID *string   `db:"refund_public_id"`
	At             time.Time `db:"created_at"`
}

// productsLimit bounds the products page; movementsLimit a product's page (its newest).
const (
	productsLimit  = 500
	movementsLimit = 200
)

const productColumns = `p.client_id, c.name AS client_name, p.sku, p.name, p.price, p.currency, p.stock,
	       p.version, p.updated_at`

// Products lists the products of every client, or of one (clientID > 0), by client and sku.
func Products(ctx context.Context, db sqlx.QueryerContext, clientID int64) ([]Product, error) {
	var rows []Product
	err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT `+productColumns+`
		  FROM products p JOIN clients c ON c.id = p.client_id
		 WHERE $1 = 0 OR p.client_id = $1
		 ORDER BY p.client_id, p.sku LIMIT $2`, clientID, productsLimit)
	if err != nil {
		return nil, fmt.Errorf("products: %w", err)
	}
	for i := range rows {
		rows[i].UpdatedAt = rows[i].UpdatedAt.UTC()
	}
	return rows, nil
}

// ErrProductNotFound is a (client, sku) with no product.
var ErrProductNotFound = errors.New("no such product")

// ProductMovements returns one product and its newest movements, each with the public ids
// of the order and the refund that caused it.
func ProductMovements(ctx context.Context, db sqlx.QueryerContext, clientID int64, sku string) (Product, []Movement, error) {
	var p struct {
		Product
		ID int64 `db:"id"`
	}
	err := sqlx.GetContext(ctx, db, &p, `
		SELECT p.id, `+productColumns+`
		  FROM products p JOIN clients c ON c.id = p.client_id
		 WHERE p.client_id = $1 AND p.sku = $2`, clientID, sku)
	if errors.Is(err, sql.ErrNoRows) {
		return Product{}, nil, ErrProductNotFound
	}
	if err != nil {
		return Product{}, nil, fmt.Errorf("product: %w", err)
	}
	p.UpdatedAt = p.UpdatedAt.UTC()
	var ms []Movement
	err = sqlx.SelectContext(ctx, db, &ms, `
		SELECT m.id, m.delta, m.reason, CAST(o.public_id AS text) AS order_public_id,
		       CAST(r.public_id AS text) AS refund_public_id, m.created_at
		  FROM stock_movements m
		  LEFT JOIN orders o ON o.id = m.order_id
		  LEFT JOIN refunds r ON r.id = m.refund_id
		 WHERE m.product_id = $1
		 ORDER BY m.id DESC LIMIT $2`, p.ID, movementsLimit)
	if err != nil {
		return Product{}, nil, fmt.Errorf("product movements: %w", err)
	}
	for i := range ms {
		ms[i].At = ms[i].At.UTC()
	}
	return p.Product, ms, nil
}
