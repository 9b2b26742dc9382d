package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// CreateOrder creates and pays for an order: POST /v1/orders. key names the intent (see
// NewKey): send the same key and the same input on every call for one purchase, after a
// restart too, and tekrar charges the card at most once. An empty key makes one (Keyed.Key,
// or Error.Key and UnknownOutcome.Key on failure, give it back): only for a caller that will
// never retry the intent after this call returns.
//
// A declined card is an *Error of code payment_declined (errors.Is(err,
// ErrPaymentDeclined)), naming the order in OrderID; it is final for this key.
func (c *Client) CreateOrder(ctx context.Context, key string, in OrderInput) (*Order, Keyed, error) {
	var o Order
	k, err := c.keyedPost(ctx, key, "/v1/orders", in, &o)
	if err != nil {
		return nil, k, err
	}
	return &o, k, nil
}

// CreateRefund refunds amount of an order: POST /v1/orders/{id}/refunds. key names the
// refund as CreateOrder's names a purchase: one per refund the merchant decides on.
func (c *Client) CreateRefund(ctx context.Context, key, orderID string, in RefundInput) (*Refund, Keyed, error) {
	if orderID == "" {
		return nil, Keyed{}, fmt.Errorf("create refund: order %w", errEmptyID)
	}
	var rf Refund
	k, err := c.keyedPost(ctx, key, "/v1/orders/"+url.PathEscape(orderID)+"/refunds", in, &rf)
	if err != nil {
		return nil, k, err
	}
	return &rf, k, nil
}

// GetOrder reads one order: GET /v1/orders/{id}.
func (c *Client) GetOrder(ctx context.Context, id string) (*Order, error) {
	var o Order
	if err := c.read(ctx, http.MethodGet, "/v1/orders/", id, nil, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// GetRefund reads one refund of an order: GET /v1/orders/{id}/refunds/{refund id}.
func (c *Client) GetRefund(ctx context.Context, orderID, refundID string) (*Refund, error) {
	if orderID == "" {
		return nil, fmt.Errorf("get refund: order %w", errEmptyID)
	}
	var rf Refund
	if err := c.read(ctx, http.MethodGet, "/v1/orders/"+url.PathEscape(orderID)+"/refunds/", refundID, nil, &rf); err != nil {
		return nil, err
	}
	return &rf, nil
}

// PutProduct creates or replaces a product, whole: PUT /v1/products/{sku}. A PUT is
// idempotent, so it takes no key and is resent as it is after a lost answer.
func (c *Client) PutProduct(ctx context.Context, sku string, in ProductInput) (*Product, error) {
	var p Product
	if err := c.read(ctx, http.MethodPut, "/v1/products/", sku, in, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// GetProduct reads a product: GET /v1/products/{sku}.
func (c *Client) GetProduct(ctx context.Context, sku string) (*Product, error) {
	var p Product
	if err := c.read(ctx, http.MethodGet, "/v1/products/", sku, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// PutCart replaces a cart's contents: PUT /v1/carts/{id}. Order it with
// OrderInput.CartID.
func (c *Client) PutCart(ctx context.Context, id string, items []Item) (*Cart, error) {
	if items == nil {
		items = []Item{} // an empty cart is "items": [], not null
	}
	var ct Cart
	if err := c.read(ctx, http.MethodPut, "/v1/carts/", id, struct {
		Items []Item `json:"items"`
	}{items}, &ct); err != nil {
		return nil, err
	}
	return &ct, nil
}

// GetCart reads a cart: GET /v1/carts/{id}.
func (c *Client) GetCart(ctx context.Context, id string) (*Cart, error) {
	var ct Cart
	if err := c.read(ctx, http.MethodGet, "/v1/carts/", id, nil, &ct); err != nil {
		return nil, err
	}
	return &ct, nil
}

// GetKey says what became of one of the client's keys: GET /v1/idempotency-keys/{key}. A
// key tekrar never saw (the first attempt never arrived) is ErrIdempotencyKeyNotFound.
func (c *Client) GetKey(ctx context.Context, key string) (*KeyStatus, error) {
	var k KeyStatus
	if err := c.read(ctx, http.MethodGet, "/v1/idempotency-keys/", key, nil, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// keyedPost sends a keyed POST with in as its body and decodes the answer into out.
func (c *Client) keyedPost(ctx context.Context, key, path string, in, out any) (Keyed, error) {
	if key == "" {
		key = NewKey()
	}
	body, err := json.Marshal(in)
	if err != nil {
		return Keyed{Key: key}, fmt.Errorf("POST %s: encoding the body: %w", path, err)
	}
	r := request{method: http.MethodPost, path: path, body: body, key: key}
	a, err := c.do(ctx, r)
	if err != nil {
		return Keyed{Key: key}, err
	}
	return keyed(r, a), decode(r, a, out)
}

// read sends an unkeyed GET or PUT of prefix+id and decodes the answer into out.
func (c *Client) read(ctx context.Context, method, prefix, id string, in, out any) error {
	if id == "" {
		return fmt.Errorf("%s %s: %w", method, prefix, errEmptyID)
	}
	r := request{method: method, path: prefix + url.PathEscape(id)}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encoding the body: %w", method, r.path, err)
		}
		r.body = b
	}
	a, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	return decode(r, a, out)
}
