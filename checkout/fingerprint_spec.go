package checkout

import "github.com/tekrar/tekrar/checkout/internal/keyed"

// FingerprintSpec says what one keyed route's fingerprint covers (keyed.Spec): the API
// puts each on its route (On) and docs/fingerprints.md lists them.
type FingerprintSpec = keyed.Spec

// The specs of the domain's keyed operations, without their routes: the API names those
// (api.FingerprintSpecs, the table docs/fingerprints.md lists) and hands them to the service
// (Config.Routes).
var (
	// OrderSpec is what creating an order covers.
	OrderSpec = FingerprintSpec{Version: 1, CardToken: "payment.card_token",
		Bound: "cart_id: the cart's items as they are when the request arrives"}
	// RefundSpec is what refunding an order covers.
	RefundSpec = FingerprintSpec{Version: 1}
)

// Routes is what the domain is told of the API's routes, by the API (api.Routes), so that
// it names none itself.
type Routes struct {
	// Order is the spec of the route that creates an order. A register's sales are
	// fingerprinted and keyed as requests to it, on purpose: a sale sent alone to it and
	// again in a batch is one order.
	Order FingerprintSpec
	// Refund is the spec of the route that refunds an order.
	Refund FingerprintSpec
	// RefundPath is the concrete path of Refund for the order of public id orderID: the
	// console's refund is keyed as the API's is.
	RefundPath func(orderID string) string
}

// validate panics naming a field the API left out: without it the service would
// fingerprint under another route than the API's.
func (r Routes) validate() {
	switch {
	case r.Order.Method == "" || r.Order.Route == "":
		panic("checkout: Config.Routes.Order has no route")
	case r.Refund.Method == "" || r.Refund.Route == "":
		panic("checkout: Config.Routes.Refund has no route")
	case r.RefundPath == nil:
		panic("checkout: Config.Routes.RefundPath is nil")
	}
}
