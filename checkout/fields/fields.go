// Package fields holds the one type of an invalid field of a request, shared by checkout
// (orders, carts, sales) and checkout/deliveries (webhook endpoints). It is its own package, and
// imports nothing, because neither of the two imports the other: hooks is the webhooks-out
// side (its tables, deliveries and SSRF policy), called by checkout/api and the console,
// and it should not take the whole checkout domain (providers, stock, refunds) for one
// struct, nor checkout the webhooks-out package. Both name it FieldError (an alias), so a
// hooks.InvalidError is a []checkout.FieldError as it stands, and validation_failed lists
// either without a copy field by field.
//
// checkout/sdk keeps its own FieldError on purpose: the merchant's client imports only
// the standard library.
package fields

// Error is one invalid field of a request: its name as the client sent it (a JSON path such
// as "items[0].quantity") and what is wrong with it. It is a member of the "errors" list of
// a validation_failed problem (docs/problems.md).
type Error struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}
