package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/internal/problem"
)

// OperatorRefund is a refund an operator asks for in the console.
type OperatorRefund struct {
	OrderID string // the order's public id
	checkout.RefundInput
	// Nonce is the random nonce of the console's confirmation form, made when the form was
	// rendered. The refund's idempotency key is derived from it, so the same form posted
	// twice refunds once.
	Nonce string
	// Meta is the operator's request, for the key's history.
	Meta checkout.Meta
}

// OperatorRefundKeyPrefix starts the idempotency key of every refund made from the console;
// the nonce follows.
const OperatorRefundKeyPrefix = "console-refund-"

// OperatorRefundResult is the refund an operator's request made, or found made.
type OperatorRefundResult struct {
	ClientID int64
	Key      string // the refund's idempotency key, under the order's client
	Refund   checkout.RefundView
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
func (a *Actions) RefundAsOperator(ctx context.Context, in OperatorRefund) (OperatorRefundResult, error) {
	if !ValidNonce(in.Nonce) {
		return OperatorRefundResult{}, ErrInvalidNonce
	}
	if errs := in.Validate(); len(errs) > 0 {
		return OperatorRefundResult{}, checkout.ValidationFailed(errs)
	}
	target, err := checkout.GetRefundTarget(ctx, a.db, in.OrderID)
	if err != nil {
		return OperatorRefundResult{}, err
	}
	client, _, err := clients.Get(ctx, a.db, target.ClientID)
	if err != nil {
		return OperatorRefundResult{}, fmt.Errorf("refund as operator: %w", err)
	}
	body, err := json.Marshal(in.RefundInput)
	if err != nil {
		return OperatorRefundResult{}, fmt.Errorf("refund as operator: %w", err)
	}
	// A double click sends the form twice at once: the second waits for the first's
	// answer and replays it (the request's Wait), rather than being told the key is in use.
	req := a.s.RefundRequest(in.OrderID)
	req.Client = client
	req.Key = OperatorRefundKeyPrefix + in.Nonce
	req.Body = body
	req.Meta = in.Meta
	out := OperatorRefundResult{ClientID: client.ID, Key: req.Key}
	res, err := a.s.CreateRefund(ctx, req, checkout.Lookup{}, in.OrderID, in.RefundInput)
	var p *problem.Problem
	if errors.As(err, &p) && p.Code == problem.CodePaymentPending {
		return a.pendingRefund(ctx, out)
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
func (a *Actions) pendingRefund(ctx context.Context, out OperatorRefundResult) (OperatorRefundResult, error) {
	ref, err := a.s.PendingRefund(ctx, out.ClientID, out.Key)
	if err != nil {
		return OperatorRefundResult{}, fmt.Errorf("refund as operator: pending refund: %w", err)
	}
	out.Pending = true
	out.Refund = ref
	return out, nil
}

// storedProblem reads back the problem a key stored as its answer.
func storedProblem(r checkout.Response) *problem.Problem {
	var b struct {
		Code   problem.Code `json:"code"`
		Detail string       `json:"detail"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Code == "" {
		return problem.Internal()
	}
	return problem.Of(b.Code).WithDetail(b.Detail)
}
