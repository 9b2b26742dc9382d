package checkout

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/internal/problem"
)

// RefundTarget is an order as an operator about to refund it needs to see it: what was
// captured, what is refunded or being refunded, and so what is left. A view of the order.
type RefundTarget struct {
	OrderID    int64
	PublicID   string // what the operator sees and the console's URLs name
	ClientID   int64
	ClientName string
	Status     string
	Amount     int64
	Currency   string
	Captured   int64
	// Refunded counts the refunds in progress too: their amounts are reserved on the order
	// when they are claimed.
	Refunded      int64
	CustomerID    string
	CustomerEmail string
}

// Refundable is what may still be refunded: only the capture of a paid (or partially
// refunded) order can be, and not while a dispute of it is open.
func (t RefundTarget) Refundable() int64 {
	if !RefundableStatuses.Has(t.Status) {
		return 0
	}
	return t.Captured - t.Refunded
}

// GetRefundTarget returns the order an operator means to refund, by its public id;
// ErrOrderNotFound if there is none.
func GetRefundTarget(ctx context.Context, db sqlx.QueryerContext, publicID string) (RefundTarget, error) {
	if !ValidOrderID(publicID) {
		return RefundTarget{}, ErrOrderNotFound
	}
	o, err := getOrder(ctx, db, `o.public_id = $1`, publicID)
	if errors.Is(err, sql.ErrNoRows) {
		return RefundTarget{}, ErrOrderNotFound
	}
	if err != nil {
		return RefundTarget{}, fmt.Errorf("get refund target: %w", err)
	}
	t := RefundTarget{OrderID: o.ID, PublicID: o.PublicID, ClientID: o.ClientID, Status: o.Status,
		Amount: o.Amount, Currency: o.Currency, Captured: o.CapturedAmount, Refunded: o.RefundedAmount,
		CustomerID: o.CustomerID.String, CustomerEmail: o.CustomerEmail.String}
	if err := sqlx.GetContext(ctx, db, &t.ClientName, `SELECT name FROM clients WHERE id = $1`, o.ClientID); err != nil {
		return RefundTarget{}, fmt.Errorf("get refund target: client: %w", err)
	}
	return t, nil
}

// OperatorRefund is a refund an operator asks for in the console.
type OperatorRefund struct {
	OrderID string // the order's public id
	RefundInput
	// Nonce is the random nonce of the console's confirmation form, made when the form was
	// rendered. The refund's idempotency key is derived from it, so the same form posted
	// twice refunds once.
	Nonce string
	// Meta is the operator's request, for the key's history.
	Meta Meta
}

// OperatorRefundKeyPrefix starts the idempotency key of every refund made from the console;
// the nonce follows.
const OperatorRefundKeyPrefix = "console-refund-"

// OperatorRefundResult is the refund an operator's request made, or found made.
type OperatorRefundResult struct {
	ClientID int64
	Key      string // the refund's idempotency key, under the order's client
	Refund   RefundView
	// Replayed: the form had been posted before, and this is that refund.
	Replayed bool
	// Pending: the provider's outcome is not known yet. The refund exists, its amount is
	// reserved on the order, and the completer finishes it (a refund needs no card).
	Pending bool
}

var nonceSyntax = regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)

// ErrInvalidNonce is a form nonce that is missing or not one the console makes.
var ErrInvalidNonce = errors.New("invalid form nonce")

// ValidNonce reports whether n looks like a nonce the console makes (URL-safe base64 of
// enough random bits).
func ValidNonce(n string) bool { return nonceSyntax.MatchString(n) }

// RefundAsOperator refunds an order at an operator's request, through the very path of
// POST /v1/orders/{id}/refunds: CreateRefund, with an idempotency key of the order's client
// (a refund belongs to the client whose order it refunds) derived from the form's nonce.
// So everything that makes an API refund safe holds for it: the amount is reserved on the
// order under its row lock and the CHECK refuses an over-refund (422
// refund_exceeds_captured); the provider refunds once under the key's providerKey;
// a crash is resumed by the completer; and a second post of the same form replays the
// first refund instead of making another. The same nonce with another amount or reason is
// 422 idempotency_key_reused: the form was changed after it was sent, and refunds nothing.
//
// Problems the API would answer come back as *problem.Problem, except payment_pending (the
// provider's outcome is unknown): then the refund exists and is pending, and the result
// says so (Pending) instead of an error, so that the console records it and does not
// invite a second refund.
func (s *Service) RefundAsOperator(ctx context.Context, in OperatorRefund) (OperatorRefundResult, error) {
	if !ValidNonce(in.Nonce) {
		return OperatorRefundResult{}, ErrInvalidNonce
	}
	if errs := in.Validate(); len(errs) > 0 {
		return OperatorRefundResult{}, ValidationFailed(errs)
	}
	target, err := GetRefundTarget(ctx, s.db, in.OrderID)
	if err != nil {
		return OperatorRefundResult{}, err
	}
	client, _, err := clients.Get(ctx, s.db, target.ClientID)
	if err != nil {
		return OperatorRefundResult{}, fmt.Errorf("refund as operator: %w", err)
	}
	body, err := json.Marshal(in.RefundInput)
	if err != nil {
		return OperatorRefundResult{}, fmt.Errorf("refund as operator: %w", err)
	}
	req := Request{
		Client: client,
		Key:    OperatorRefundKeyPrefix + in.Nonce,
		Method: s.cfg.Routes.Refund.Method,
		Path:   s.cfg.Routes.RefundPath(in.OrderID),
		Body:   body,
		// A double click sends the form twice at once: the second waits for the first's
		// answer and replays it, rather than being told the key is in use.
		Wait: s.cfg.MaxWait,
		Meta: in.Meta,
	}
	out := OperatorRefundResult{ClientID: client.ID, Key: req.Key}
	res, err := s.CreateRefund(ctx, req, Lookup{}, in.OrderID, in.RefundInput)
	var p *problem.Problem
	if errors.As(err, &p) && p.Code == problem.CodePaymentPending {
		return s.pendingRefund(ctx, out)
	}
	if err != nil {
		return OperatorRefundResult{}, err
	}
	if res.Status >= 400 {
		// A final refusal the provider gave (refunded_at_provider, refund_refused), stored
		// on the key: the operator is told what the API client would be.
		return OperatorRefundResult{}, storedProblem(res.Response)
	}
	if res.Status != http.StatusCreated {
		return OperatorRefundResult{}, fmt.Errorf("refund as operator: key %q answered %d", req.Key, res.Status)
	}
	if err := json.Unmarshal(res.Body, &out.Refund); err != nil {
		return OperatorRefundResult{}, fmt.Errorf("refund as operator: stored refund: %w", err)
	}
	out.Replayed = res.Replayed
	return out, nil
}

// pendingRefund reads back the refund whose provider outcome is unknown.
func (s *Service) pendingRefund(ctx context.Context, out OperatorRefundResult) (OperatorRefundResult, error) {
	k, err := keyed.Get(ctx, s.db, out.ClientID, out.Key)
	if err != nil {
		return OperatorRefundResult{}, fmt.Errorf("refund as operator: pending refund: %w", err)
	}
	ref, err := loadRefund(ctx, s.db, k.RefundID.Int64)
	if err != nil {
		return OperatorRefundResult{}, fmt.Errorf("refund as operator: %w", err)
	}
	out.Pending = true
	out.Refund = ref.view("pending")
	return out, nil
}

// storedProblem reads back the problem a key stored as its answer.
func storedProblem(r Response) *problem.Problem {
	var b struct {
		Code   problem.Code `json:"code"`
		Detail string       `json:"detail"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Code == "" {
		return problem.Internal()
	}
	return problem.Of(b.Code).WithDetail(b.Detail)
}
