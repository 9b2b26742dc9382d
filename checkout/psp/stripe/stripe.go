package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/tekrar/tekrar/checkout/psp"
)

// Metadata keys tekrar sets on what it creates at Stripe.
const (
	// MetaKey is tekrar's provider key of a charge (or refund): what CancelCharge searches.
	MetaKey = "tekrar_key"
	// MetaReference is tekrar's reference of a charge, the order it is for (also its
	// description): what ChargesByReference searches.
	MetaReference = "tekrar_reference"
	// MetaReason is the reason tekrar gave for a refund; Stripe's own reason is a short enum.
	MetaReason = "tekrar_reason"
)

// Defaults of Options.
const (
	// APIBaseDefault is Stripe's API.
	APIBaseDefault = stripego.APIURL
	// RefundLookBackDefault is how far back LookupRefund pages through refunds: twice
	// Stripe's 24 h key window, after which tekrar's key is no longer repeated anyway.
	RefundLookBackDefault = 48 * time.Hour
)

// Options configure a Provider.
type Options struct {
	// SecretKey is the account's secret API key (sk_test_… or sk_live_…); required.
	SecretKey string
	// APIBase is where Stripe's API is reached: APIBaseDefault, or a stripe-mock.
	APIBase string
	// HTTPClient carries every request; nil: one with a 80 s timeout (stripe-go's).
	HTTPClient *http.Client
	// MaxNetworkRetries is how often stripe-go itself repeats a request that failed (with
	// the same Idempotency-Key). 0, the default here, leaves every repeat to tekrar.
	MaxNetworkRetries int64
	// RefundLookBack bounds LookupRefund's paging; 0 means RefundLookBackDefault.
	RefundLookBack time.Duration
	// Now is the clock of LookupRefund's window; nil means time.Now.
	Now func() time.Time
}

// Provider is a psp.Provider (and psp.ReferenceFinder) on a Stripe account.
type Provider struct {
	sc       *stripego.Client
	lookBack time.Duration
	now      func() time.Time
}

var (
	_ psp.Provider        = (*Provider)(nil)
	_ psp.ReferenceFinder = (*Provider)(nil)
	_ psp.Promiser        = (*Provider)(nil)
)

// New returns a provider on the account of opts.SecretKey.
func New(opts Options) (*Provider, error) {
	if opts.SecretKey == "" {
		return nil, errors.New("stripe: a secret key is required")
	}
	if opts.APIBase == "" {
		opts.APIBase = APIBaseDefault
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 80 * time.Second}
	}
	if opts.RefundLookBack <= 0 {
		opts.RefundLookBack = RefundLookBackDefault
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	backends := stripego.NewBackendsWithConfig(&stripego.BackendConfig{
		HTTPClient:        opts.HTTPClient,
		URL:               stripego.String(strings.TrimRight(opts.APIBase, "/")),
		MaxNetworkRetries: stripego.Int64(opts.MaxNetworkRetries),
		// tekrar logs what it decides; stripe-go's own lines would repeat them.
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
	})
	return &Provider{sc: stripego.NewClient(opts.SecretKey, stripego.WithBackends(backends)),
		lookBack: opts.RefundLookBack, now: opts.Now}, nil
}

// Capability is Stripe's row of the capability table: what recovery may lean on.
func (p *Provider) Capability() psp.Capability {
	c, _ := psp.CapabilityOf(psp.ProviderStripe)
	return c
}

// Charge implements psp.Provider: a PaymentIntent created and confirmed under req.Key.
func (p *Provider) Charge(ctx context.Context, req psp.ChargeRequest) (psp.Charge, error) {
	if err := checkChargeRequest(req); err != nil {
		return psp.Charge{}, err
	}
	params := &stripego.PaymentIntentCreateParams{
		Amount:             stripego.Int64(req.Amount),
		Currency:           stripego.String(strings.ToLower(req.Currency)),
		Confirm:            stripego.Bool(true),
		PaymentMethodTypes: []*string{stripego.String("card")},
		Metadata:           map[string]string{MetaKey: req.Key},
	}
	params.IdempotencyKey = stripego.String(req.Key)
	params.AddExpand("latest_charge")
	if req.Description != "" {
		params.Description = stripego.String(req.Description)
		params.Metadata[MetaReference] = req.Description
	}
	if req.PaymentMethod != "" {
		params.PaymentMethod = stripego.String(req.PaymentMethod)
		params.Customer = stripego.String(req.Customer)
		params.OffSession = stripego.Bool(true)
	} else {
		params.PaymentMethod = stripego.String(req.CardToken)
	}
	pi, err := p.sc.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		err = errorOf("create payment intent", err)
		var d *DeclineError
		if errors.As(err, &d) && d.PaymentIntent != "" {
			// A decline is a result, saved under the key like any answer.
			return psp.Charge{ID: d.PaymentIntent, Key: req.Key, Amount: req.Amount, Currency: req.Currency,
				Status: psp.StatusDeclined, DeclineCode: d.Code, Description: req.Description, Created: p.now().UTC()}, nil
		}
		return psp.Charge{}, err
	}
	c, err := chargeOf(pi, req.Key)
	if err != nil {
		return psp.Charge{}, err
	}
	if c.Status == psp.StatusCanceled {
		return psp.Charge{}, fmt.Errorf("stripe: create payment intent %s: %w", pi.ID, psp.ErrKeyCanceled)
	}
	return c, nil
}

// checkChargeRequest refuses what Stripe would refuse as malformed, before a request.
func checkChargeRequest(req psp.ChargeRequest) error {
	switch {
	case req.Key == "" || len(req.Key) > 255:
		return fmt.Errorf("%w: key must be 1 to 255 characters", psp.ErrInvalidRequest)
	case req.Amount <= 0:
		return fmt.Errorf("%w: amount must be positive", psp.ErrInvalidRequest)
	case len(req.Currency) != 3:
		return fmt.Errorf("%w: currency must be an ISO 4217 code", psp.ErrInvalidRequest)
	case req.CardToken == "" && (req.PaymentMethod == "" || req.Customer == ""):
		return fmt.Errorf("%w: a charge needs a card token, or a customer's payment method", psp.ErrInvalidRequest)
	case req.CardToken != "" && req.PaymentMethod != "":
		return fmt.Errorf("%w: send card_token or payment_method, not both", psp.ErrInvalidRequest)
	}
	return nil
}

// chargeOf is tekrar's charge of a PaymentIntent. A PaymentIntent still on its way
// (requires_action, processing, requires_confirmation, requires_capture), or one without a
// payment attempt, is no result: its outcome is unknown.
func chargeOf(pi *stripego.PaymentIntent, key string) (psp.Charge, error) {
	if key == "" {
		key = pi.Metadata[MetaKey]
	}
	c := psp.Charge{ID: pi.ID, Key: key, Amount: pi.Amount, Currency: strings.ToUpper(string(pi.Currency)),
		Description: pi.Description, Created: time.Unix(pi.Created, 0).UTC()}
	if ch := pi.LatestCharge; ch != nil {
		c.Refunded = min(ch.AmountRefunded, c.Amount)
		if d := ch.PaymentMethodDetails; d != nil && d.Card != nil {
			c.CardBrand, c.CardLast4, c.CardFingerprint = string(d.Card.Brand), d.Card.Last4, d.Card.Fingerprint
		}
	}
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded:
		c.Status = psp.StatusSucceeded
	case stripego.PaymentIntentStatusCanceled:
		c = psp.Charge{ID: pi.ID, Key: key, Currency: c.Currency, Status: psp.StatusCanceled, Description: c.Description, Created: c.Created}
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		e := pi.LastPaymentError
		if e == nil || e.Type != stripego.ErrorTypeCard {
			return psp.Charge{}, fmt.Errorf("stripe: payment intent %s: %s without a card's decline: %w", pi.ID, pi.Status, ErrNotFinal)
		}
		c.Status, c.DeclineCode = psp.StatusDeclined, declineCode(e)
		c.Refunded = 0
	default:
		return psp.Charge{}, fmt.Errorf("stripe: payment intent %s is %s: %w", pi.ID, pi.Status, ErrNotFinal)
	}
	return c, nil
}

// ErrNotFinal is a PaymentIntent whose payment has no outcome yet (it needs the customer's
// action, or the network's answer): for tekrar, the outcome is unknown.
var ErrNotFinal = errors.New("the payment has no outcome yet")

// Refund implements psp.Provider: a refund of the PaymentIntent req.ChargeID under req.Key.
func (p *Provider) Refund(ctx context.Context, req psp.RefundRequest) (psp.Refund, error) {
	switch {
	case req.Key == "" || len(req.Key) > 255:
		return psp.Refund{}, fmt.Errorf("%w: key must be 1 to 255 characters", psp.ErrInvalidRequest)
	case req.ChargeID == "" || req.Amount <= 0:
		return psp.Refund{}, fmt.Errorf("%w: a refund needs a charge and a positive amount", psp.ErrInvalidRequest)
	}
	params := &stripego.RefundCreateParams{
		PaymentIntent: stripego.String(req.ChargeID),
		Amount:        stripego.Int64(req.Amount),
		Metadata:      map[string]string{MetaKey: req.Key},
	}
	if req.Reason != "" {
		params.Metadata[MetaReason] = req.Reason
	}
	params.IdempotencyKey = stripego.String(req.Key)
	r, err := p.sc.V1Refunds.Create(ctx, params)
	if err != nil {
		return psp.Refund{}, errorOf("create refund", err)
	}
	return refundOf(r, req.Key, req.ChargeID)
}

// refundOf is tekrar's refund of a Stripe refund. A pending refund is made (Stripe sends it
// to the card network); a failed or canceled one is not.
func refundOf(r *stripego.Refund, key, chargeID string) (psp.Refund, error) {
	switch r.Status {
	case stripego.RefundStatusSucceeded, stripego.RefundStatusPending:
	case stripego.RefundStatusFailed, stripego.RefundStatusCanceled:
		return psp.Refund{}, fmt.Errorf("stripe: refund %s is %s: %w", r.ID, r.Status, psp.ErrNotRefundable)
	default:
		return psp.Refund{}, fmt.Errorf("stripe: refund %s is %s: %w", r.ID, r.Status, ErrNotFinal)
	}
	if chargeID == "" && r.PaymentIntent != nil {
		chargeID = r.PaymentIntent.ID
	}
	return psp.Refund{ID: r.ID, Key: key, ChargeID: chargeID, Amount: r.Amount,
		Currency: strings.ToUpper(string(r.Currency)), Status: psp.RefundSucceeded, Created: time.Unix(r.Created, 0).UTC()}, nil
}

// LookupCharge implements psp.Provider: Stripe finds no charge by its idempotency key.
// Recovery finds it by reference (ChargesByReference), as the capability row says.
func (p *Provider) LookupCharge(ctx context.Context, key string) (psp.Charge, error) {
	return psp.Charge{}, fmt.Errorf("stripe: look up charge by key: %w", psp.ErrLookupUnsupported)
}

// LookupRefund implements psp.Provider: the refund whose metadata holds key, among those
// created in the last RefundLookBack, or psp.ErrNotFound.
func (p *Provider) LookupRefund(ctx context.Context, key string) (psp.Refund, error) {
	params := &stripego.RefundListParams{CreatedRange: &stripego.RangeQueryParams{
		GreaterThanOrEqual: p.now().Add(-p.lookBack).Unix()}}
	params.Limit = stripego.Int64(100)
	for r, err := range p.sc.V1Refunds.List(ctx, params) {
		if err != nil {
			return psp.Refund{}, errorOf("list refunds", err)
		}
		if r.Metadata[MetaKey] == key {
			return refundOf(r, key, "")
		}
	}
	return psp.Refund{}, fmt.Errorf("stripe: refund under key %q: %w", key, psp.ErrNotFound)
}

// CancelCharge implements psp.Provider: the fence is a cancel of the PaymentIntent made
// under key, found by its metadata. A PaymentIntent that had an outcome first is returned
// as it is; one that cannot be found cannot be fenced (ErrCancelUnsupported): Stripe's
// search may not show it yet, and a request still in flight may create it later.
func (p *Provider) CancelCharge(ctx context.Context, key string) (psp.Charge, error) {
	found, err := p.search(ctx, MetaKey, key)
	if err != nil {
		return psp.Charge{}, err
	}
	if len(found) == 0 {
		return psp.Charge{}, fmt.Errorf("stripe: no payment intent found under key %q: %w", key, psp.ErrCancelUnsupported)
	}
	pi := found[0]
	for _, f := range found {
		if f.Status == stripego.PaymentIntentStatusSucceeded {
			pi = f
		}
	}
	if c, err := chargeOf(pi, key); err == nil {
		return c, nil
	}
	params := &stripego.PaymentIntentCancelParams{}
	params.AddExpand("latest_charge")
	canceled, err := p.sc.V1PaymentIntents.Cancel(ctx, pi.ID, params)
	if err != nil {
		return psp.Charge{}, errorOf("cancel payment intent "+pi.ID, err)
	}
	return chargeOf(canceled, key)
}

// ChargesByReference implements psp.ReferenceFinder: the PaymentIntents whose metadata
// holds reference and that have an outcome, oldest first. Stripe's search is eventually
// consistent (the capability row's FindLag).
func (p *Provider) ChargesByReference(ctx context.Context, reference string) ([]psp.Charge, error) {
	if reference == "" || len(reference) > 500 {
		return nil, fmt.Errorf("%w: reference must be 1 to 500 characters", psp.ErrInvalidRequest)
	}
	found, err := p.search(ctx, MetaReference, reference)
	if err != nil {
		return nil, err
	}
	var out []psp.Charge
	for _, pi := range found {
		if c, err := chargeOf(pi, ""); err == nil {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b psp.Charge) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// search finds the PaymentIntents whose metadata[name] is value.
func (p *Provider) search(ctx context.Context, name, value string) ([]*stripego.PaymentIntent, error) {
	params := &stripego.PaymentIntentSearchParams{}
	params.Query = fmt.Sprintf("metadata[%s]:%s", quote(name), quote(value))
	params.AddExpand("data.latest_charge")
	var out []*stripego.PaymentIntent
	for pi, err := range p.sc.V1PaymentIntents.Search(ctx, params) {
		if err != nil {
			return nil, errorOf("search payment intents", err)
		}
		if pi.Metadata[name] == value {
			out = append(out, pi)
		}
	}
	return out, nil
}

// quote is a string of Stripe's search query language: in single quotes, with quotes and
// backslashes escaped.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// ListCharges implements psp.Provider: the PaymentIntents created in [q.Since, q.Until)
// that have an outcome, oldest first. Stripe lists newest first and pages from the newest,
// so every page reads the window and starts after q.After: a reconciliation window of a
// day or two is a few pages of a hundred.
func (p *Provider) ListCharges(ctx context.Context, q psp.ChargeListQuery) (psp.ChargePage, error) {
	if q.Limit == 0 {
		q.Limit = psp.MaxListLimit
	}
	if q.Limit < 0 || q.Limit > psp.MaxListLimit || q.Since.IsZero() || !q.Since.Before(q.Until) {
		return psp.ChargePage{}, fmt.Errorf("%w: a window since before until, and a limit of 1 to %d", psp.ErrInvalidRequest, psp.MaxListLimit)
	}
	params := &stripego.PaymentIntentListParams{CreatedRange: &stripego.RangeQueryParams{
		GreaterThanOrEqual: q.Since.Unix(), LesserThan: ceilUnix(q.Until)}}
	params.Limit = stripego.Int64(100)
	params.AddExpand("data.latest_charge")
	var all []psp.Charge
	for pi, err := range p.sc.V1PaymentIntents.List(ctx, params) {
		if err != nil {
			return psp.ChargePage{}, errorOf("list payment intents", err)
		}
		c, err := chargeOf(pi, "")
		created := time.Unix(pi.Created, 0)
		if err != nil || created.Before(q.Since.Truncate(time.Second)) || !created.Before(q.Until) {
			continue // no outcome yet, or outside the window
		}
		all = append(all, c)
	}
	slices.Reverse(all) // oldest first
	if q.After != "" {
		i := slices.IndexFunc(all, func(c psp.Charge) bool { return c.ID == q.After })
		if i < 0 {
			return psp.ChargePage{}, fmt.Errorf("stripe: list payment intents after %q: %w", q.After, psp.ErrNotFound)
		}
		all = all[i+1:]
	}
	var page psp.ChargePage
	if len(all) > q.Limit {
		all = all[:q.Limit]
		page.Next = all[len(all)-1].ID
	}
	page.Charges = all
	if page.Charges == nil {
		page.Charges = []psp.Charge{}
	}
	return page, nil
}

// ceilUnix is t in whole seconds, rounded up: Stripe's created is in seconds.
func ceilUnix(t time.Time) int64 {
	if t.Truncate(time.Second).Equal(t) {
		return t.Unix()
	}
	return t.Unix() + 1
}

// CardFingerprint implements psp.Provider: the card.fingerprint of the PaymentMethod token
// names (pm_…), or of one made from a card token (tok_…), which charges nothing.
func (p *Provider) CardFingerprint(ctx context.Context, token string) (string, error) {
	if token == "" || len(token) > 500 {
		return "", fmt.Errorf("%w: card_token must be 1 to 500 characters", psp.ErrInvalidRequest)
	}
	var pm *stripego.PaymentMethod
	var err error
	if strings.HasPrefix(token, "pm_") {
		pm, err = p.sc.V1PaymentMethods.Retrieve(ctx, token, nil)
	} else {
		pm, err = p.sc.V1PaymentMethods.Create(ctx, &stripego.PaymentMethodCreateParams{
			Type: stripego.String("card"), Card: &stripego.PaymentMethodCreateCardParams{Token: stripego.String(token)}})
	}
	if err != nil {
		err = errorOf("card fingerprint", err)
		if d := (*DeclineError)(nil); errors.As(err, &d) {
			return "", fmt.Errorf("stripe: card fingerprint: the card is refused (%s): %w", d.Code, psp.ErrNotFound)
		}
		return "", err
	}
	if pm.Card == nil || pm.Card.Fingerprint == "" || len(pm.Card.Fingerprint) > psp.MaxCardFingerprint {
		return "", fmt.Errorf("stripe: card fingerprint: payment method %s has no card's fingerprint", pm.ID)
	}
	return pm.Card.Fingerprint, nil
}
