package checkout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tekrar/tekrar/checkout/catalog"
	"github.com/tekrar/tekrar/internal/problem"
)

// boundCart is the cart an order request names, read once before the request is
// fingerprinted: the items it is fingerprinted with are the items the order takes.
type boundCart struct {
	found bool
	items []Item
}

// BindCart reads the cart an order request names by cart_id, as it is now, into req: its
// items become part of the request's fingerprint (Request.Bound), so that the same key
// with a changed cart is another request (a conflict), and the same key with the same cart
// a replay. It runs before Replay. A body that names no cart costs a byte search.
func (s *Service) BindCart(ctx context.Context, req *Request) error {
	// A member named with escapes ("cart\u005fid") is still cart_id to the decoder.
	if !bytes.Contains(req.Body, []byte("cart_id")) && !bytes.Contains(req.Body, []byte(`\u`)) {
		return nil
	}
	var named struct {
		CartID *string `json:"cart_id"`
	}
	if json.Unmarshal(req.Body, &named) != nil || named.CartID == nil {
		return nil // not JSON, or no cart: the decoder says what is wrong, if anything
	}
	req.cart = &boundCart{}
	raw, items, err := catalog.CartItems(ctx, s.db, req.Client.ID, *named.CartID)
	switch {
	case errors.Is(err, catalog.ErrCartNotFound):
		req.Bound = []byte("null") // no cart: unlike any cart's items
		return nil
	case err != nil:
		return err
	}
	req.cart.found = true
	req.cart.items = items
	req.Bound = raw
	return nil
}

// withCart is an order input with the items of the cart BindCart read for req.
func (req Request) withCart(in OrderInput) (OrderInput, error) {
	if req.cart == nil {
		return OrderInput{}, errors.New("order with cart_id: the cart was not bound to the request")
	}
	if !req.cart.found {
		return OrderInput{}, problem.Of(problem.CodeCartNotFound).
			WithDetail("cart_id names no cart of this client; nothing was stored").Advised()
	}
	in.Items = req.cart.items
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if len(in.Items) == 0 {
		add("cart_id", "names an empty cart")
	}
	if sum, overflow := catalog.ValidateItems(add, "cart.items", in.Items); !overflow && sum != in.Amount {
		add("amount", "must equal the sum of the cart's items (%d)", sum)
	}
	if len(errs) > 0 {
		return OrderInput{}, ValidationFailed(errs)
	}
	return in, nil
}
