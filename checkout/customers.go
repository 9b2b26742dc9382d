package checkout

// A saved card is named by a customer id and a payment method id. The customer id is the
// merchant's: every client has its "cus_1", and one provider account holds the cards of
// every client's customers. tekrar therefore never sends a client's customer id to the
// provider as it is: it sends the client's provider customer (clients.Client's
// ProviderCustomer), the client's own random prefix and the customer. A client can only
// ever name its own customers at the provider, whatever ids it sends, and the provider
// (which charges a method only with the customer it was saved for) finds another client's
// card unknown: the charge is declined as invalid_card, exactly as for a card that does not
// exist, and the other client's card is never charged (docs/security.md).
//
// The prefix is a stored value of the client, not its id: after a failover that lost a
// client, or a restore, the id may be another client's, the prefix never is (migration
// 00040). The claim of an order writes the provider customer from the client's row, in
// the claim's own statement (providerCustomerSQL), and every charge of the order reads it
// from there.

// MaxCustomer is the longest payment.customer a client may send: the provider customer id
// derived from it, at most 255 characters, also holds the client's prefix (at most 28).
const MaxCustomer = 200
