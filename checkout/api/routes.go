package api

import (
	"net/http"
	"strings"

	"github.com/tekrar/tekrar/checkout"
)

// The keyed routes, named here once: Register mounts them (under /v1, the group
// internal/app gives it), their fingerprint specs name them, and the domain is handed them
// (Routes) instead of naming any.
const (
	ordersRoute  = "/v1/orders"
	refundsRoute = "/v1/orders/{id}/refunds"
)

// FingerprintSpecs is the table of what each keyed route's fingerprint covers, one row
// per route: the domain's spec of the operation the route runs, on the route.
// docs/fingerprints.md lists the same table (TestFingerprintSpecsMatchTheDocs).
var FingerprintSpecs = []checkout.FingerprintSpec{
	checkout.OrderSpec.On(http.MethodPost, ordersRoute),
	checkout.RefundSpec.On(http.MethodPost, refundsRoute),
}

// Routes is what the service is told of the API's routes (checkout.Config.Routes): a
// register's sales are fingerprinted as POST /v1/orders, and the console's refund is keyed
// as POST /v1/orders/{id}/refunds of its order.
var Routes = checkout.Routes{
	Order:      FingerprintSpecs[0],
	Refund:     FingerprintSpecs[1],
	RefundPath: func(orderID string) string { return strings.Replace(refundsRoute, "{id}", orderID, 1) },
}
