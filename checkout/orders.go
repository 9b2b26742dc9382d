package checkout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/catalog"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/fields"
	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/mailbox"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/pgtext"
	"github.com/tekrar/tekrar/internal/problem"
)

// OrderInput is the body of POST /v1/orders.
type OrderInput struct {
	Currency string `json:"currency"`
	// Items, or CartID: the items of one of the client's carts as they are when the order
	// arrives (see BindCart).
	Items    []Item            `json:"items,omitempty"`
	CartID   string            `json:"cart_id,omitempty"`
	Amount   int64             `json:"amount" tekrar:"required"`
	Payment  PaymentInput      `json:"payment"`
	Customer *Customer         `json:"customer,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Installments, 2 to 12, pays the order in that many monthly installments on a saved
	// card (Payment.PaymentMethod); 0 or 1 charges it at once (docs/installments.md).
	Installments int `json:"installments,omitempty"`
}

// Item is one line of an order or a cart: the catalog's line (catalog.Item), one type for
// both, since an order made from a cart copies the cart's lines.
type Item = catalog.Item

// PaymentInput names how the order is paid: a single-use card token, or a card the customer
// saved at the provider (Customer, the client's own customer id, and PaymentMethod, the
// provider's method id). The token goes to the provider and nowhere else: it is not stored,
// logged or returned. A saved card is charged with the client's provider customer, which names the client
// too, so a client can name only its own customers' cards; its ids are stored with the
// order, which charges its later installments on it. Method is for the
// sales of a register (POST /v1/pos/sales): "cash", or "card_present", a charge the
// register's terminal already authorised, named by its Reference; an order (POST /v1/orders)
// and a register's card_token sale leave it out and are charged through the provider.
type PaymentInput struct {
	CardToken     string `json:"card_token,omitempty"`
	Customer      string `json:"customer,omitempty"`
	PaymentMethod string `json:"payment_method,omitempty"`
	Method        string `json:"method,omitempty"`
	Reference     string `json:"reference,omitempty"`
}

// Payment methods of a register's sale (PaymentInput.Method); "" is a card token.
const (
	MethodCash        = "cash"
	MethodCardPresent = "card_present"
)

// Customer identifies who pays; optional.
type Customer struct {
	ID    string `json:"id,omitempty"`
	Email string `json:"email,omitempty"`
}

// Limits of an order, documented in docs/api.md.
const (
	MaxItems         = catalog.MaxItems
	MaxAmount        = money.MaxAmount // 10^12 minor units
	MaxQuantity      = catalog.MaxQuantity
	MaxMetadataKeys  = 20
	MaxMetadataKey   = 40
	MaxMetadataValue = 500
)

// Validate lists every problem with the input at once.
func (in *OrderInput) Validate() []FieldError { return in.validate(false) }

// ValidateSale is Validate for a sale of a register: the payment may also be cash or
// card_present, and the items must be sent (a register's sale names no cart).
func (in *OrderInput) ValidateSale() []FieldError { return in.validate(true) }

func (in *OrderInput) validate(sale bool) []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !money.ValidCurrency(in.Currency) {
		add("currency", "must be an upper-case ISO 4217 code such as TRY or EUR")
	}
	var sum int64
	overflow := false
	switch {
	case in.CartID != "":
		// The cart's items were validated when it was stored; their sum is checked
		// against amount once they are bound (CreateOrder).
		if len(in.Items) > 0 {
			add("items", "must be left out when cart_id is sent")
		}
		if !catalog.ValidCartID(in.CartID) {
			add("cart_id", "must be 1 to 255 visible ASCII characters")
		}
		overflow = true
	case len(in.Items) == 0:
		add("items", "must list at least one item (or send cart_id)")
	default:
		sum, overflow = catalog.ValidateItems(add, "items", in.Items)
	}
	switch {
	case in.Amount <= 0 || in.Amount > MaxAmount:
		add("amount", "must be between 1 and %d minor units", int64(MaxAmount))
	case !overflow && in.Amount != sum:
		add("amount", "must equal the sum of the items (%d)", sum)
	}
	switch pay := in.Payment; {
	case pay.Method != "" && !sale:
		add("payment.method", "must be left out: cash and card_present are sales of a register (POST /v1/pos/sales)")
	case pay.Method == MethodCash || pay.Method == MethodCardPresent:
		if pay.CardToken != "" {
			add("payment.card_token", "must be left out when method is %s", pay.Method)
		}
		if pay.Method == MethodCash && pay.Reference != "" {
			add("payment.reference", "must be left out when method is cash")
		}
		if pay.Method == MethodCardPresent && (pay.Reference == "" || len(pay.Reference) > 255 || !pgtext.Valid(pay.Reference)) {
			add("payment.reference", "is required with card_present: the terminal's reference of the authorised charge (at most 255 characters)")
		}
		if in.CartID != "" {
			add("cart_id", "must be left out of a register's sale: send its items")
		}
	case pay.Method != "":
		add("payment.method", "must be cash or card_present, or left out for a card_token")
	case pay.Reference != "":
		add("payment.reference", "must be left out unless method is card_present")
	default:
		validatePayment(add, in)
	}
	if pay := in.Payment; pay.Method != "" && (pay.Customer != "" || pay.PaymentMethod != "" || in.Installments != 0) {
		add("payment.method", "must be left out with a saved card or installments")
	}
	if sale && in.Installments > 1 {
		// The register's claim keeps no plan: the sale would be charged its first
		// installment and its order could never record it.
		add("installments", "must be left out of a register's sale: a sale is paid at once")
	}
	if sale && in.CartID != "" && in.Payment.Method == "" {
		add("cart_id", "must be left out of a register's sale: send its items")
	}
	if c := in.Customer; c != nil {
		if len(c.ID) > 255 {
			add("customer.id", "must be at most 255 characters")
		} else if !pgtext.Valid(c.ID) {
			add("customer.id", noNUL)
		}
		if c.Email != "" {
			// The receipt's address: tekrar mails it on the client's word (docs/receipts.md).
			var bad *mailbox.Invalid
			if errors.As(mailbox.Check(c.Email), &bad) {
				add("customer.email", "must be an ordinary mailbox address, local@domain: %s", bad.Reason)
			}
		}
	}
	if len(in.Metadata) > MaxMetadataKeys {
		add("metadata", "must have at most %d keys", MaxMetadataKeys)
	}
	// In key order: a map ranges in a different order each time, and a refused body's answer
	// must be the same bytes on every resend.
	for _, k := range slices.Sorted(maps.Keys(in.Metadata)) {
		v := in.Metadata[k]
		if k == "" || len(k) > MaxMetadataKey {
			add("metadata", "keys must be 1 to %d characters", MaxMetadataKey)
		} else if !pgtext.Valid(k) {
			add("metadata", "keys "+noNUL)
		}
		if len(v) > MaxMetadataValue {
			add("metadata."+k, "must be at most %d characters", MaxMetadataValue)
		} else if !pgtext.Valid(v) {
			add("metadata."+k, noNUL)
		}
	}
	return errs
}

// validatePayment checks the payment and the installments: a token, or a saved card (its
// customer and payment method); installments only on a saved card, each at least one minor
// unit.
func validatePayment(add func(field, format string, args ...any), in *OrderInput) {
	pay := in.Payment
	switch {
	case pay.PaymentMethod != "" || pay.Customer != "":
		if pay.CardToken != "" {
			add("payment.card_token", "must be left out when payment.payment_method is sent")
		}
		for _, f := range []struct{ name, v string }{{"payment.customer", pay.Customer}, {"payment.payment_method", pay.PaymentMethod}} {
			if f.v == "" || len(f.v) > 255 {
				add(f.name, "is required with a saved card (at most 255 characters)")
			} else if f.name == "payment.customer" && len(f.v) > MaxCustomer {
				add(f.name, "must be at most %d characters", MaxCustomer)
			} else if !pgtext.Valid(f.v) {
				add(f.name, noNUL)
			}
		}
	case pay.CardToken == "" || len(pay.CardToken) > 255:
		add("payment.card_token", "is required (at most 255 characters), or payment.customer and payment.payment_method")
	case !pgtext.Valid(pay.CardToken):
		add("payment.card_token", noNUL)
	}
	switch {
	case in.Installments == 0 || in.Installments == 1:
	case in.Installments < MinInstallments || in.Installments > MaxInstallments:
		add("installments", "must be between %d and %d", MinInstallments, MaxInstallments)
	case pay.PaymentMethod == "":
		add("installments", "needs a saved card: send payment.customer and payment.payment_method")
	case in.Amount > 0 && in.Amount < int64(in.Installments):
		add("installments", "must be at most the amount (%d): each installment is at least one minor unit", in.Amount)
	}
}

// noNUL is the message for text holding U+0000 (fields.NoNUL).
const noNUL = fields.NoNUL

// OrderView is an order as the API shows it: the body of a 201 and of GET /v1/orders/{id}.
type OrderView struct {
	ID             string            `json:"id"` // the public id, "ord_..."
	Status         string            `json:"status"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	Items          []Item            `json:"items"`
	Customer       *Customer         `json:"customer,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Payment        *PaymentView      `json:"payment,omitempty"`
	RefundedAmount int64             `json:"refunded_amount"`
	CreatedAt      time.Time         `json:"created_at"`
	// Installments is the plan of an order paid in installments, first to last.
	Installments []InstallmentView `json:"installments,omitempty"`
	plan         int               // how many installments (1: none)
}

// PaymentView is the provider charge of an order, without anything that could be used to
// charge the card again.
type PaymentView struct {
	// Method is cash or card_present for a register's sale paid so; a provider charge
	// leaves it out. ID is then the terminal's reference ("" for cash).
	Method      string `json:"method,omitempty"`
	ID          string `json:"id"`
	Status      string `json:"status"`
	DeclineCode string `json:"decline_code,omitempty"`
	CardBrand   string `json:"card_brand,omitempty"`
	CardLast4   string `json:"card_last4,omitempty"`
}

// CreateOrder runs POST /v1/orders for a validated input; lk is what Replay learnt of the
// request (the zero Lookup when it was not asked).
func (s *Service) CreateOrder(ctx context.Context, req Request, lk Lookup, in OrderInput) (Result, error) {
	if in.CartID != "" {
		var err error
		if in, err = req.withCart(in); err != nil {
			return Result{}, err
		}
	}
	return s.execute(ctx, req, lk, &orderOp{s: s, in: in})
}

type orderOp struct {
	s  *Service
	in OrderInput
}

func (o *orderOp) Spec() FingerprintSpec { return o.s.cfg.Routes.Order }

// claim creates the key row and the pending order in one statement.
func (o *orderOp) Claim(ctx context.Context, k *Key) (*Key, bool, error) {
	items, err := json.Marshal(o.in.Items)
	if err != nil {
		return nil, false, fmt.Errorf("encode items: %w", err)
	}
	var metadata []byte
	if len(o.in.Metadata) > 0 {
		if metadata, err = json.Marshal(o.in.Metadata); err != nil {
			return nil, false, fmt.Errorf("encode metadata: %w", err)
		}
	}
	lines := stockLines(o.in.Items)
	p := orderClaim{keyClaim: claimOf(k, "charge"), Amount: o.in.Amount, Currency: o.in.Currency, Items: string(items), Metadata: nullJSON(metadata)}
	stockParams(&p, lines)
	if c := o.in.Customer; c != nil {
		p.CustomerID, p.CustomerEmail = nullString(c.ID), nullString(c.Email)
	}
	p.PaymentCustomer, p.PaymentMethod = nullString(o.in.Payment.Customer), nullString(o.in.Payment.PaymentMethod)
	if err := o.planParams(ctx, &p); err != nil {
		return nil, false, err
	}
	key, claimed, err := claimOrder(ctx, o.s.q, p)
	if errors.Is(err, errShortStock) {
		return nil, false, shortStockProblem(ctx, o.s.db, k.ClientID, o.in.Currency, lines)
	}
	return key, claimed, err
}

// planParams puts the order's installments, if it has any, into the claim's parameters: the
// schedule reads the order's day in the client's time zone.
func (o *orderOp) planParams(ctx context.Context, p *orderClaim) error {
	p.Installments = int64(max(o.in.Installments, 1))
	if p.Installments == 1 {
		return nil
	}
	var zone string
	if err := sqlx.GetContext(ctx, o.s.db, &zone, `SELECT time_zone FROM clients WHERE id = $1`, p.ClientID); err != nil {
		return fmt.Errorf("read the client's time zone: %w", err)
	}
	loc, err := clients.Location(zone)
	if err != nil {
		return fmt.Errorf("client %d: %w", p.ClientID, err)
	}
	for _, in := range planInstallments(o.in.Amount, o.in.Installments, p.CreatedAt, loc) {
		p.InstAmounts = append(p.InstAmounts, in.Amount)
		p.InstDueOn = append(p.InstDueOn, in.DueOn.String())
		p.InstDueAt = append(p.InstDueAt, in.DueAt.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// providerCustomer is the customer the saved card of an order or a register's sale is
// charged with: the client's stored prefix and the client's customer (customers.go), as an
// order's claim wrote it into the order; "" for a card token, with no query. The prefix never
// changes, so reading it again gives what the claim wrote.
func (o *orderOp) providerCustomer(ctx context.Context, k *Key) (string, error) {
	if o.in.Payment.Customer == "" {
		return "", nil
	}
	var prefix string
	if err := sqlx.GetContext(ctx, o.s.q, &prefix, clientPrefixSQL, k.ClientID); err != nil {
		return "", fmt.Errorf("read the client's provider customer prefix: %w", err)
	}
	return prefix + o.in.Payment.Customer, nil
}

// firstCharge is what the order's own charge takes: the order's amount, or its first
// installment.
func (in *OrderInput) firstCharge() int64 {
	if in.Installments > 1 {
		return splitAmount(in.Amount, in.Installments)[0]
	}
	return in.Amount
}

func (o *orderOp) Run(ctx context.Context, k *Key, resumed bool) (Response, error) {
	pk := providerKey("charge", k)
	if err := keyed.PublicIDs(ctx, o.s.q, k); err != nil { // no query: the claim and TakeOver read it
		return Response{}, err
	}
	customer, err := o.providerCustomer(ctx, k)
	if err != nil {
		return Response{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, o.s.cfg.ProviderTimeout)
	defer cancel()
	// send is whether the charge goes to the provider: always on a first run; on a resumed
	// one only when the look-up found no charge yet. A charge neither sent nor found is
	// never settled.
	var ch psp.Charge
	send := true
	if resumed {
		// The previous worker may have charged before it died: ask first, the way the
		// provider can find a charge. A charge is sent again only if the provider answers a
		// repeat with the first charge (psp.MayResend: its keys replay and the key's window,
		// counted from the claim, the first send's upper bound, has not passed); else none
		// found yet is given up on as the completer does, fenced or with a refund owed, and
		// the retry gets the canceled order's answer.
		c := o.s.promises()
		ch, err = o.s.findOrderCharge(pctx, c, k, o.in.firstCharge(), o.in.Currency)
		if psp.NoChargeYet(err) && !psp.MayResend(c, o.s.cfg.Now().Sub(k.CreatedAt)) {
			return o.s.giveUpResumed(ctx, k, c)
		}
		send = psp.NoChargeYet(err)
	}
	if send {
		ch, err = o.s.provider.Charge(pctx, psp.ChargeRequest{
			Key: pk, Amount: o.in.firstCharge(), Currency: o.in.Currency, CardToken: o.in.Payment.CardToken,
			Customer: customer, PaymentMethod: o.in.Payment.PaymentMethod,
			Description: chargeDescription(k.OrderPublicID),
		})
	}
	if resumed && psp.AnswerOf(psp.OpCharge, err).Verdict == psp.VerdictLookUp {
		// A retry may pay with a new token of the key's card (docs/fingerprints.md). If the
		// first attempt was still being charged when this one looked, its charge has since
		// been made under the same provider key with the first token, and the provider
		// refuses this token there: that charge is the order's, if it is for the order's
		// amount. Anything else stays a bug for an operator.
		ch, err = o.s.findOrderCharge(pctx, o.s.promises(), k, 0, "")
		if err == nil && (ch.Amount != o.in.Amount || ch.Currency != o.in.Currency) {
			err = fmt.Errorf("%w: charge %s under the order's provider key is for %d %s", psp.ErrKeyReused, ch.ID, ch.Amount, ch.Currency)
		}
	}
	if psp.AnswerOf(psp.OpCharge, err).Verdict == psp.VerdictRefused || (err == nil && ch.Status == psp.StatusCanceled) {
		// The key was given up on and fenced at the provider while this worker was away
		// (frozen past its lease, or dead before the cancel was recorded): nothing was
		// charged. Record that, if this worker still holds the key; if not, its new owner
		// did or will.
		return cancelOrder(ctx, o.s.q, k, o.s.cfg.Now(), nil)
	}
	if err != nil {
		return o.s.providerFailed(ctx, k, psp.OpCharge, err)
	}

	if ch.CardFingerprint == "" && !k.CardFingerprint.Valid && o.in.Payment.CardToken != "" {
		// The answer does not say which card was charged (a look-up by key, a provider
		// whose charges do not carry it): ask, as every order did before its charge's answer
		// carried it, so that the key keeps its card for a re-tokenized retry. A failure
		// leaves the key without one: such a retry is then refused as a reused key.
		if card, err := o.s.cardOf(ctx, o.in.Payment.CardToken); err == nil {
			k.CardFingerprint = card
		}
	}
	o.s.crash(CrashAfterProvider)
	view := OrderView{
		ID: k.OrderPublicID, Amount: o.in.Amount, Currency: o.in.Currency, Items: o.in.Items,
		Customer: o.in.Customer, Metadata: o.in.Metadata, CreatedAt: k.CreatedAt.UTC(),
		plan: max(o.in.Installments, 1),
	}
	if err := o.s.withInstallments(ctx, &view, k.OrderID.Int64); err != nil {
		return Response{}, err
	}
	resp, err := o.s.settleOrder(ctx, o.s.q, k, view, ch, pk)
	if errors.Is(err, keyed.ErrFenced) {
		// Another worker settled the key meanwhile. With the same charge (the same provider
		// key) nothing is owed; if it canceled the order at a provider that cannot fence,
		// this charge must be refunded, and the debt is recorded in Postgres.
		o.s.oweRefundIfCanceled(ctx, k, ch)
	}
	return resp, err
}

// giveUpResumed gives up on the charge of a resumed order that the provider does not have
// and that may not be sent again (giveUpCharge: fenced where the provider can, else canceled
// with a refund owed of any charge that still appears). A provider that cannot answer the
// cancel leaves the key for the next retry, as an unknown outcome does.
func (s *Service) giveUpResumed(ctx context.Context, k *Key, c psp.Capability) (Response, error) {
	reason := fmt.Sprintf("a resumed order's charge was not found and may not be sent again (%s)", c.Provider)
	settle, err := s.giveUpCharge(ctx, k, reason)
	if settle == nil {
		return s.providerFailed(ctx, k, psp.OpCancelCharge, err)
	}
	s.logger.Warn("resumed order given up: its charge may not be sent again", "key_id", k.ID, "provider", c.Provider)
	resp, _, err := settle(s.q)
	return resp, err
}

// settleOrder stores the outcome of a charge: the order paid (201) or declined (402), its
// payment, and the key's response, fenced by the key's lease token. db is the pool, or the
// transaction of an operator's release, which records the release with the settlement.
func (s *Service) settleOrder(ctx context.Context, db sqlx.QueryerContext, k *Key, view OrderView, ch psp.Charge, pk string) (Response, error) {
	view.Payment = &PaymentView{ID: ch.ID, Status: ch.Status, DeclineCode: ch.DeclineCode, CardBrand: ch.CardBrand, CardLast4: ch.CardLast4}
	var resp Response
	var captured int64
	now := s.cfg.Now()
	view.settleFirstInstallment(ch, now)
	if ch.Status == psp.StatusSucceeded {
		view.Status = StatusPaid
		captured = view.Amount
		if view.plan > 1 {
			captured = ch.Amount // the first installment
		}
		body, err := json.Marshal(view)
		if err != nil {
			return Response{}, fmt.Errorf("encode order: %w", err)
		}
		// No Location: the API, which knows its routes, adds it to this response and its
		// replays (keys completed before it did still store one, the same).
		resp = Response{Status: http.StatusCreated, Body: body, Header: map[string]string{
			"Content-Type": "application/json",
		}}
	} else {
		view.Status = StatusDeclined
		p := declinedAnswer(view.ID, ch.DeclineCode)
		resp = Response{Status: p.Status, Body: p.Body(k.Path), Header: map[string]string{"Content-Type": problem.ContentType}}
	}
	if err := completeOrder(ctx, db, k, resp, now, view.Status, view.plan, captured, ch, pk); err != nil {
		return Response{}, err
	}
	return resp, nil
}

// declinedAnswer is the stored answer of an order whose card was declined.
func declinedAnswer(orderID, declineCode string) *problem.Problem {
	return problem.Of(problem.CodePaymentDeclined).
		WithDetail("the card was declined; the order is kept in status declined").
		With("order_id", orderID).With("decline_code", declineCode).Advised()
}

// providerFailed handles a provider answer to op that settles nothing now (psp.AnswerOf): an
// unknown outcome, where the charge (or refund) may or may not exist, gives the key back so
// that the client's retry resumes at once, and will look it up before asking again; a
// refusal of what tekrar derived (a reused or malformed request), which no retry fixes,
// hands the key to an operator.
func (s *Service) providerFailed(ctx context.Context, k *Key, op string, perr error) (Response, error) {
	if a := psp.AnswerOf(op, perr); a.Verdict != psp.VerdictUnknown {
		s.logger.Error("the provider refused what tekrar derived", "key_id", k.ID, "operation", op, "err", perr)
		if err := markAttention(ctx, s.q, k, fmt.Sprintf("the payment provider refused the %s: %v", op, perr)); err != nil {
			return Response{}, err
		}
		return Response{}, keyed.ProblemNeedsAttention()
	}
	s.logger.Warn("provider outcome unknown", "key_id", k.ID, "err", perr)
	if _, err := keyed.SetStateIfInProgress(ctx, s.q, keyed.Release(k, s.cfg.Now())); err != nil {
		s.logger.Warn("release key after provider failure", "key_id", k.ID, "err", err)
	}
	return Response{}, paymentPending()
}
