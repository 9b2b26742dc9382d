package checkout

import "strconv"

// A saved card is named by a customer id and a payment method id. The customer id is the
// merchant's: every client has its "cus_1", and one provider account holds the cards of
// every client's customers. tekrar therefore never sends a client's customer id to the
// provider as it is: it sends ProviderCustomer, which names the client too. A client can
// only ever name its own customers at the provider, whatever ids it sends, and the
// provider (which charges a method only with the customer it was saved for) finds another
// client's card unknown: the charge is declined as invalid_card, exactly as for a card that
// does not exist, and the other client's card is never charged (docs/security.md).

// providerCustomerPrefix starts every provider customer id tekrar derives.
const providerCustomerPrefix = "cl_"

// MaxCustomer is the longest payment.customer a client may send: the provider customer id
// derived from it, at most 255 characters, also holds the client id.
const MaxCustomer = 200

// ProviderCustomer is the provider's customer id for customer of client clientID:
// "cl_<client id>_<customer>". The client id is digits up to the first "_", so no two
// (client, customer) pairs share one. A client's backend saves its customers' cards at the
// provider under this id (GET /v1/client says the client id).
func ProviderCustomer(clientID int64, customer string) string {
	return providerCustomerPrefix + strconv.FormatInt(clientID, 10) + "_" + customer
}
