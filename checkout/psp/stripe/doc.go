// Package stripe is a psp.Provider on Stripe's PaymentIntents, through Stripe's own Go
// library, stripe-go (imported as stripego, so that this package's name can say what it
// provides without hiding the library's). stripe-go is maintained by Stripe with its API:
// its error types carry what tekrar's decisions need (type, code, decline code, HTTP
// status, the answer's headers), its webhook package verifies Stripe-Signature, and a
// client of our own would have to follow every API version by hand.
//
// # What a call is at Stripe
//
//   - Charge: one PaymentIntent created and confirmed in the same request (confirm=true),
//     the card token as its payment method (a PaymentMethod id, pm_…, as Stripe's mobile
//     SDKs make it), tekrar's derived key as Idempotency-Key, tekrar's reference (the
//     order) as its description, and both in its metadata (MetaKey, MetaReference): Stripe
//     finds nothing by key, so a PaymentIntent is found by searching its metadata. The
//     charge's card and its fingerprint come from latest_charge, expanded in the answer.
//   - Refund: a refund of the PaymentIntent under the refund's derived key, the key in its
//     metadata; LookupRefund pages through the recent refunds for it (RefundLookBack).
//   - CancelCharge (the fence): the PaymentIntent found by its key's metadata, canceled. A
//     PaymentIntent the search does not find (it may lag by up to an hour) cannot be
//     fenced: ErrCancelUnsupported, so that checkout owes a refund of whatever appears.
//   - LookupCharge: ErrLookupUnsupported; the type is a psp.ReferenceFinder instead.
//   - ListCharges: the PaymentIntents created in the window, oldest first.
//
// # Answers
//
// Every error goes through errorOf, which follows the Stripe row of the capability table
// (psp.CapabilityOf(psp.ProviderStripe)): a card_error is a declined charge (a result), an
// invalid_request_error is ErrInvalidRequest, an idempotency_error ErrKeyReused, and a 429,
// a Stripe-Should-Retry: true, a 5xx or no answer at all leave the outcome unknown. Stripe
// saves a 500 under its key, so a repeat of the key replays the 500: only a look-up
// settles it. stripe-go's own retries are off by default (Options.MaxNetworkRetries):
// tekrar's engine decides when a key is sent again.
//
// # Webhooks
//
// EventOf verifies a delivery's Stripe-Signature with stripe-go's webhook package and turns
// payment_intent.succeeded, payment_intent.payment_failed and charge.refunded into the
// provider events the sandbox sends, for the same provider inbox (checkout/inbox).
package stripe
