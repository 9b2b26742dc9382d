package sdk

import "time"

// OrderInput is the body of POST /v1/orders (docs/api.md): either Items or CartID.
type OrderInput struct {
	Currency string            `json:"currency"`
	Items    []Item            `json:"items,omitempty"`
	CartID   string            `json:"cart_id,omitempty"`
	Amount   int64             `json:"amount"`
	Payment  Payment           `json:"payment"`
	Customer *Customer         `json:"customer,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Installments (2 to 12) pays the order monthly on a saved card (Payment.Customer and
	// Payment.PaymentMethod): the first now, the others on their due dates
	// (docs/installments.md). 0 or 1 pays it at once.
	Installments int `json:"installments,omitempty"`
}

// Item is one order or cart line; amounts are in the currency's minor unit.
type Item struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	Quantity   int64  `json:"quantity"`
	UnitAmount int64  `json:"unit_amount"`
	FromStock  bool   `json:"from_stock,omitempty"`
}

// Payment is how an order is paid: a single-use card token from the payment provider's
// SDK, or a card the customer saved at the provider (Customer, your own customer id, and
// PaymentMethod). Save the card at the provider under customer
// "<provider_customer_prefix><Customer>", the prefix as GET /v1/client says it: tekrar
// charges it so, and never another client's customer's card (docs/security.md).
type Payment struct {
	CardToken     string `json:"card_token,omitempty"`
	Customer      string `json:"customer,omitempty"`
	PaymentMethod string `json:"payment_method,omitempty"`
}

// Customer identifies who ordered.
type Customer struct {
	ID    string `json:"id,omitempty"`
	Email string `json:"email,omitempty"`
}

// Order is an order as tekrar answers it.
type Order struct {
	ID             string            `json:"id"`
	Status         string            `json:"status"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	Items          []Item            `json:"items"`
	Customer       *Customer         `json:"customer,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Payment        *PaymentResult    `json:"payment,omitempty"`
	RefundedAmount int64             `json:"refunded_amount"`
	CreatedAt      time.Time         `json:"created_at"`
	// Installments is the plan of an order paid in installments, one entry per installment.
	Installments []Installment `json:"installments,omitempty"`
}

// Installment is one installment of an order's plan.
type Installment struct {
	N      int    `json:"n"`
	Amount int64  `json:"amount"`
	DueOn  string `json:"due_on"` // YYYY-MM-DD, in the client's time zone
	// Status: scheduled, paid, attention (declined on every retry; an operator's) or
	// canceled (the order was refunded or declined first).
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	NextAttempt *time.Time `json:"next_attempt_at,omitempty"`
	DeclineCode string     `json:"decline_code,omitempty"`
	PaidAt      *time.Time `json:"paid_at,omitempty"`
}

// PaymentResult is the charge of an order.
type PaymentResult struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	DeclineCode string `json:"decline_code,omitempty"`
	CardBrand   string `json:"card_brand,omitempty"`
	CardLast4   string `json:"card_last4,omitempty"`
}

// RefundInput is the body of POST /v1/orders/{id}/refunds.
type RefundInput struct {
	Amount       int64         `json:"amount"`
	Reason       string        `json:"reason,omitempty"`
	Restock      bool          `json:"restock,omitempty"`
	RestockItems []RestockItem `json:"restock_items,omitempty"`
}

// RestockItem puts quantity units of sku back into stock with a refund.
type RestockItem struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// Refund is a refund as tekrar answers it.
type Refund struct {
	ID        string    `json:"id"`
	OrderID   string    `json:"order_id"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// ProductInput is a product, whole, for PUT /v1/products/{sku}.
type ProductInput struct {
	Name     string `json:"name"`
	Price    int64  `json:"price"`
	Currency string `json:"currency"`
	Stock    int64  `json:"stock"`
}

// Product is a product as tekrar answers it.
type Product struct {
	SKU       string    `json:"sku"`
	Name      string    `json:"name"`
	Price     int64     `json:"price"`
	Currency  string    `json:"currency"`
	Stock     int64     `json:"stock"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Cart is a cart as tekrar answers it.
type Cart struct {
	ID        string    `json:"id"`
	Items     []Item    `json:"items"`
	Amount    int64     `json:"amount"`
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Keyed is what a keyed call's answer says about its key.
type Keyed struct {
	// Key is the Idempotency-Key the call sent.
	Key string
	// Replayed: the answer is the stored answer of an earlier attempt (Idempotent-Replayed),
	// as after a lost answer; the request was not executed again.
	Replayed bool
	// Expires is when tekrar stops replaying the key (Idempotency-Expires); after it, a retry
	// is refused with idempotency_key_expired. Zero when the answer had none.
	Expires time.Time
	// Attempts is how many requests the call sent.
	Attempts int
}

// KeyStatus is what became of a key (GET /v1/idempotency-keys/{key}): for a service that
// restarted with an intent whose outcome it does not know.
type KeyStatus struct {
	Key   string `json:"key"`
	State string `json:"state"` // in_progress, completed, needs_attention
	// RecoveryPoint is how far the request got (docs/recovery.md).
	RecoveryPoint string `json:"recovery_point"`
	Method        string `json:"method"`
	Path          string `json:"path"`
	// Fingerprint (hex) is what the stored request hashes to, by FingerprintAlgorithm: a
	// retry with another body would be refused as idempotency_key_reused.
	Fingerprint          string    `json:"fingerprint"`
	FingerprintAlgorithm string    `json:"fingerprint_algorithm"`
	OrderID              string    `json:"order_id,omitempty"`
	RefundID             string    `json:"refund_id,omitempty"`
	ResponseStatus       *int      `json:"response_status,omitempty"`
	Expired              bool      `json:"expired"`
	CreatedAt            time.Time `json:"created_at"`
	ExpiresAt            time.Time `json:"expires_at"`
	// Next says, for people, what a retry with this key would do.
	Next string `json:"next"`
}
