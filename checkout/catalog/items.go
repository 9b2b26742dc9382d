package catalog

import (
	"strconv"

	"github.com/tekrar/tekrar/checkout/fields"
	"github.com/tekrar/tekrar/checkout/mailbox"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/internal/pgtext"
)

// Item is one line of an order or a cart. Amounts are integers in minor units. A line
// marked FromStock is a sale of the client's product SKU: the order takes Quantity from its
// stock, and UnitAmount must be its price (see stock.go). Other lines are free-form.
type Item struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	Quantity   int64  `json:"quantity" tekrar:"required"`
	UnitAmount int64  `json:"unit_amount" tekrar:"required"`
	FromStock  bool   `json:"from_stock,omitempty"`
}

// Limits of a list of lines, documented in docs/api.md (an order's limits, checkout.MaxItems
// and MaxQuantity, are these).
const (
	MaxItems    = 100
	MaxQuantity = 10_000
)

// ValidateItems checks the lines of an order or a cart (field names them, "items") and
// returns their sum; overflow is true when a line is out of range, and the sum meaningless.
func ValidateItems(add func(field, format string, args ...any), field string, items []Item) (sum int64, overflow bool) {
	if len(items) > MaxItems {
		add(field, "must list at most %d items", MaxItems)
	}
	price := map[string]int64{}
	for i, it := range items {
		f := field + "[" + strconv.Itoa(i) + "]."
		if it.SKU == "" || len(it.SKU) > 64 {
			add(f+"sku", "must be 1 to 64 characters")
		} else if !pgtext.Valid(it.SKU) {
			add(f+"sku", fields.NoNUL)
		}
		if it.Name == "" || len(it.Name) > 200 {
			add(f+"name", "must be 1 to 200 characters")
		} else if !pgtext.Valid(it.Name) {
			add(f+"name", fields.NoNUL)
		} else if !mailbox.PlainText(it.Name) {
			add(f+"name", mailbox.TextMessage)
		}
		if it.Quantity < 1 || it.Quantity > MaxQuantity {
			add(f+"quantity", "must be between 1 and %d", MaxQuantity)
		}
		if it.UnitAmount < 0 || it.UnitAmount > money.MaxAmount {
			add(f+"unit_amount", "must be between 0 and %d minor units", int64(money.MaxAmount))
		}
		if it.Quantity > 0 && it.Quantity <= MaxQuantity && it.UnitAmount >= 0 && it.UnitAmount <= money.MaxAmount {
			sum += it.Quantity * it.UnitAmount // at most 10^4 * 10^12 * 100 items: fits int64
		} else {
			overflow = true
		}
		if it.FromStock {
			if p, ok := price[it.SKU]; ok && p != it.UnitAmount {
				add(f+"unit_amount", "must be the same on every from_stock line of sku %q (the product has one price)", it.SKU)
			}
			price[it.SKU] = it.UnitAmount
		}
	}
	return sum, overflow
}
