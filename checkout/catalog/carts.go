package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/problem"
)

// CartInput is the body of PUT /v1/carts/{id}: the cart's whole contents, replaced. A cart
// may be empty; an order from an empty cart is refused.
type CartInput struct {
	Items []Item `json:"items"`
}

// Validate lists every problem with the input; id is the path's.
func (in *CartInput) Validate(id string) []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !ValidCartID(id) {
		add("id", "must be 1 to 255 visible ASCII characters")
	}
	if in.Items == nil {
		add("items", "is required (an empty list empties the cart)")
	}
	ValidateItems(add, "items", in.Items)
	return errs
}

// ValidCartID reports whether s can name a cart: the client chooses it, with the syntax of
// an Idempotency-Key (1 to 255 visible ASCII characters).
func ValidCartID(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// CartView is a cart as the API shows it; amount is the sum of its items. Its version is
// the ETag header's.
type CartView struct {
	ID        string    `json:"id"`
	Items     []Item    `json:"items"`
	Amount    int64     `json:"amount"`
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ErrCartNotFound is an id the client has no cart under; another client's is the same. A
// shared value, never modified.
var ErrCartNotFound error = problem.Of(problem.CodeCartNotFound)

type cart struct {
	ID        int64     `db:"id"`
	PublicID  string    `db:"public_id"`
	Items     []byte    `db:"items"`
	Version   int64     `db:"version"`
	UpdatedAt time.Time `db:"updated_at"`
}

const cartSelect = `SELECT id, public_id, items, version, updated_at FROM carts`

func (c *cart) view() (CartView, error) {
	v := CartView{ID: c.PublicID, Version: c.Version, UpdatedAt: c.UpdatedAt.UTC()}
	if err := json.Unmarshal(c.Items, &v.Items); err != nil {
		return CartView{}, fmt.Errorf("cart %d items: %w", c.ID, err)
	}
	for _, it := range v.Items {
		v.Amount += it.Quantity * it.UnitAmount
	}
	return v, nil
}

// PutCart replaces the contents of one of the client's carts, creating it, if pre holds.
// Contents equal to the current ones (as JSON values) change nothing, not even the
// version. The precondition is checked and the write made under the cart's row lock, so
// of two PUTs with the same If-Match exactly one is applied.
func (s *Store) PutCart(ctx context.Context, clientID int64, id string, in CartInput, pre Precondition) (_ CartView, created bool, _ error) {
	items, err := json.Marshal(in.Items)
	if err != nil {
		return CartView{}, false, fmt.Errorf("encode cart items: %w", err)
	}
	var out cart
	err = tdb.InTx(ctx, s.db, "put cart", func(tx *sqlx.Tx) error {
		now := s.now()
		for range 2 {
			var cur cart
			err := tx.GetContext(ctx, &cur, `
				SELECT id, public_id, items, version, updated_at FROM carts
				 WHERE client_id = $1 AND public_id = $2 FOR UPDATE`, clientID, id)
			if errors.Is(err, sql.ErrNoRows) {
				if !pre.holds(false, 0) {
					return errStale("cart", false, 0)
				}
				err = tx.GetContext(ctx, &out, `
					INSERT INTO carts (client_id, public_id, items, created_at, updated_at)
					VALUES ($1, $2, CAST($3 AS text)::jsonb, $4, $4)
					ON CONFLICT (client_id, public_id) DO NOTHING
					RETURNING id, public_id, items, version, updated_at`, clientID, id, string(items), now)
				if errors.Is(err, sql.ErrNoRows) {
					continue // created meanwhile: read it under its lock
				}
				if err != nil {
					return fmt.Errorf("create cart: %w", err)
				}
				created = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("read cart: %w", err)
			}
			if !pre.holds(true, cur.Version) {
				return errStale("cart", true, cur.Version)
			}
			var curItems []Item
			if err := json.Unmarshal(cur.Items, &curItems); err != nil {
				return fmt.Errorf("cart %d items: %w", cur.ID, err)
			}
			if slices.Equal(curItems, in.Items) {
				out = cur
				return nil
			}
			err = tx.GetContext(ctx, &out, `
				UPDATE carts SET items = CAST($2 AS text)::jsonb, version = version + 1, updated_at = $3
				 WHERE id = $1
				RETURNING id, public_id, items, version, updated_at`, cur.ID, string(items), now)
			if err != nil {
				return fmt.Errorf("update cart: %w", err)
			}
			return nil
		}
		return fmt.Errorf("put cart: %q neither found nor created", id)
	})
	if err != nil {
		return CartView{}, false, err
	}
	v, err := out.view()
	return v, created, err
}

// GetCart returns one of the client's carts.
func (s *Store) GetCart(ctx context.Context, clientID int64, id string) (CartView, error) {
	c, err := getCart(ctx, s.db, clientID, id)
	if err != nil {
		return CartView{}, err
	}
	return c.view()
}

func getCart(ctx context.Context, db sqlx.QueryerContext, clientID int64, id string) (cart, error) {
	if !ValidCartID(id) {
		return cart{}, ErrCartNotFound
	}
	var c cart
	err := sqlx.GetContext(ctx, db, &c, cartSelect+` WHERE client_id = $1 AND public_id = $2`, clientID, id)
	if errors.Is(err, sql.ErrNoRows) {
		return cart{}, ErrCartNotFound
	}
	if err != nil {
		return cart{}, fmt.Errorf("get cart: %w", err)
	}
	return c, nil
}

// DeleteCart deletes one of the client's carts, if pre holds. Orders made from it keep
// their items: an order copies them.
func (s *Store) DeleteCart(ctx context.Context, clientID int64, id string, pre Precondition) error {
	if !ValidCartID(id) {
		return ErrCartNotFound
	}
	return tdb.InTx(ctx, s.db, "delete cart", func(tx *sqlx.Tx) error {
		var version int64
		err := tx.GetContext(ctx, &version, `
			SELECT version FROM carts WHERE client_id = $1 AND public_id = $2 FOR UPDATE`, clientID, id)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrCartNotFound
		}
		if err != nil {
			return fmt.Errorf("delete cart: %w", err)
		}
		if !pre.holds(true, version) {
			return errStale("cart", true, version)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM carts WHERE client_id = $1 AND public_id = $2`, clientID, id); err != nil {
			return fmt.Errorf("delete cart: %w", err)
		}
		return nil
	})
}

// CartItems reads one of the client's carts for an order that names it (checkout's
// BindCart): its items as stored, the bytes the order's fingerprint covers, and decoded,
// the lines the order takes. ErrCartNotFound when the client has no cart under id. It is a
// function of a querier, not of a Store, because the order reads the cart with the
// service's own pool.
func CartItems(ctx context.Context, db sqlx.QueryerContext, clientID int64, id string) (json.RawMessage, []Item, error) {
	c, err := getCart(ctx, db, clientID, id)
	if err != nil {
		return nil, nil, err
	}
	var items []Item
	if err := json.Unmarshal(c.Items, &items); err != nil {
		return nil, nil, fmt.Errorf("cart %d items: %w", c.ID, err)
	}
	return c.Items, items, nil
}
