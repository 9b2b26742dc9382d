package stripe

import (
	"errors"
	"fmt"
	"net/http"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/tekrar/tekrar/checkout/psp"
)

// DeclineError is Stripe's card_error: the card was declined and nothing was charged. To a
// charge it is a result (psp.StatusDeclined), not an error; PaymentIntent names the
// PaymentIntent the decline is recorded on, when Stripe's answer carries it.
type DeclineError struct {
	Code          string // the decline_code, or else the error's code ("card_declined")
	PaymentIntent string
}

func (e *DeclineError) Error() string { return "stripe: card declined: " + e.Code }

// ErrRetrySameKey is a 429, or an answer with Stripe-Should-Retry: true: Stripe says the
// request may be sent again under the same key. The outcome is unknown to tekrar all the
// same (the capability row's "retry same key"), so it is none of psp's definitive errors.
var ErrRetrySameKey = errors.New("stripe asks for the request to be repeated under the same key")

// Stripe's error codes of a refund that tekrar's answer table tells apart.
const (
	codeChargeAlreadyRefunded = "charge_already_refunded"
	codeAmountTooLarge        = "amount_too_large"
	codeResourceMissing       = "resource_missing"
	codeIdempotencyKeyInUse   = "idempotency_key_in_use"
	codeLockTimeout           = "lock_timeout"
)

// errorOf is the one place a Stripe answer becomes tekrar's: op names the call for the
// message. It follows the Stripe row of the capability table (psp.CapabilityOf
// (psp.ProviderStripe).Errors), which TestErrorOfFollowsTheCapabilityRow checks:
//
//   - card_error: a *DeclineError (a result for a charge);
//   - 429, Stripe-Should-Retry: true, idempotency_key_in_use, lock_timeout: ErrRetrySameKey,
//     outcome unknown;
//   - idempotency_error: psp.ErrKeyReused;
//   - invalid_request_error: psp.ErrInvalidRequest, but resource_missing is psp.ErrNotFound,
//     and a refund beyond the charge (charge_already_refunded, amount_too_large)
//     psp.ErrRefundExceedsCharge, so that the refunds made at Stripe are looked up;
//   - 401 and 403 (a wrong or restricted key): outcome unknown, never a refusal stored on a
//     client's key, so that the orders go through once the key is fixed;
//   - api_error, any 5xx, an answer that is not Stripe's, no answer: outcome unknown.
func errorOf(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *stripego.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("stripe: %s: no answer: %w", op, err)
	}
	msg := fmt.Sprintf("stripe: %s: %d %s", op, se.HTTPStatusCode, se.Type)
	if se.Code != "" {
		msg += " " + string(se.Code)
	}
	if se.Msg != "" {
		msg += ": " + se.Msg
	}
	shouldRetry := se.LastResponse != nil && se.LastResponse.Header.Get("Stripe-Should-Retry") == "true"
	switch {
	case se.Type == stripego.ErrorTypeCard:
		d := &DeclineError{Code: string(se.DeclineCode)}
		if d.Code == "" {
			d.Code = string(se.Code)
		}
		if d.Code == "" {
			d.Code = psp.DeclineCardDeclined
		}
		if se.PaymentIntent != nil {
			d.PaymentIntent = se.PaymentIntent.ID
		}
		return d
	case se.HTTPStatusCode == http.StatusTooManyRequests || shouldRetry ||
		se.Code == codeIdempotencyKeyInUse || se.Code == codeLockTimeout:
		return fmt.Errorf("%s: %w", msg, ErrRetrySameKey)
	case se.Type == stripego.ErrorTypeIdempotency:
		return fmt.Errorf("%s: %w", msg, psp.ErrKeyReused)
	case se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden:
		return errors.New(msg + ": the secret key is refused; the outcome is unknown")
	case se.Type == stripego.ErrorTypeInvalidRequest && se.Code == codeResourceMissing:
		return fmt.Errorf("%s: %w", msg, psp.ErrNotFound)
	case se.Type == stripego.ErrorTypeInvalidRequest && (se.Code == codeChargeAlreadyRefunded || se.Code == codeAmountTooLarge):
		return fmt.Errorf("%s: %w", msg, psp.ErrRefundExceedsCharge)
	case se.Type == stripego.ErrorTypeInvalidRequest && se.HTTPStatusCode < http.StatusInternalServerError:
		return fmt.Errorf("%s: %w", msg, psp.ErrInvalidRequest)
	}
	return errors.New(msg + ": the outcome is unknown")
}

// declineCode is what a PaymentIntent's last_payment_error says of its decline.
func declineCode(e *stripego.Error) string {
	switch {
	case e.DeclineCode != "":
		return string(e.DeclineCode)
	case e.Code != "":
		return string(e.Code)
	}
	return psp.DeclineCardDeclined
}
