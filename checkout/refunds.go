package checkout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/catalog"
	"github.com/tekrar/tekrar/checkout/mailbox"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/pgtext"
	"github.com/tekrar/tekrar/internal/problem"
)

// RefundInput is the body of POST /v1/orders/{id}/refunds.
type RefundInput struct {
	Amount int64  `json:"amount" tekrar:"required"`
	Reason string `json:"reason,omitempty"`
	// Restock puts back into stock what the order took from it (its from_stock lines):
	// all of it not put back yet, or only RestockItems. It happens once, with the refund's
	// claim (see restock).
	Restock      bool          `json:"restock,omitempty"`
	RestockItems []RestockItem `json:"restock_items,omitempty"`
}

// RestockItem is a quantity of one sku to put back.
type RestockItem struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity" tekrar:"required"`
}

// Validate lists every problem with the input.
func (in *RefundInput) Validate() []FieldError {
	var errs []FieldError
	if in.Amount <= 0 || in.Amount > MaxAmount {
		errs = append(errs, FieldError{Field: "amount", Message: fmt.Sprintf("must be between 1 and %d minor units", int64(MaxAmount))})
	}
	if len(in.Reason) > 500 {
		errs = append(errs, FieldError{Field: "reason", Message: "must be at most 500 characters"})
	} else if !pgtext.Valid(in.Reason) {
		errs = append(errs, FieldError{Field: "reason", Message: noNUL})
	} else if !mailbox.PlainText(in.Reason) {
		errs = append(errs, FieldError{Field: "reason", Message: mailbox.TextMessage})
	}
	if len(in.RestockItems) > 0 && !in.Restock {
		errs = append(errs, FieldError{Field: "restock", Message: "must be true when restock_items is sent"})
	}
	if len(in.RestockItems) > MaxItems {
		errs = append(errs, FieldError{Field: "restock_items", Message: fmt.Sprintf("must list at most %d items", MaxItems)})
	}
	seen := map[string]bool{}
	for i, it := range in.RestockItems {
		f := "restock_items[" + strconv.Itoa(i) + "]."
		switch {
		case !catalog.ValidSKU(it.SKU):
			errs = append(errs, FieldError{Field: f + "sku", Message: "must be 1 to 64 characters, without U+0000"})
		case seen[it.SKU]:
			errs = append(errs, FieldError{Field: f + "sku", Message: "is listed twice"})
		}
		seen[it.SKU] = true
		if it.Quantity < 1 || it.Quantity > catalog.MaxStock {
			errs = append(errs, FieldError{Field: f + "quantity", Message: fmt.Sprintf("must be between 1 and %d", catalog.MaxStock)})
		}
	}
	return errs
}

// RefundView is a refund as the API shows it.
type RefundView struct {
	ID        string    `json:"id"`       // the public id, "rf_..."
	OrderID   string    `json:"order_id"` // the order's public id
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Problems of refunds, raised before anything is stored.
var (
	errNotRefundable = func(status string) *problem.Problem {
		return problem.Of(problem.CodeOrderNotRefundable).
			WithDetail("only a paid order (or one refunded in part) can be refunded; this one is " + status).Advised()
	}
	errExceedsCaptured = func() *problem.Problem {
		return problem.Of(problem.CodeRefundExceedsCaptured).
			WithDetail("the refunds of an order, counting those in progress, cannot exceed its captured amount").Advised()
	}
)

// CreateRefund runs POST /v1/orders/{id}/refunds for a validated input; orderID is the
// order's public id; lk is what Replay learnt of the request (the zero Lookup when it was
// not asked).
func (s *Service) CreateRefund(ctx context.Context, req Request, lk Lookup, orderID string, in RefundInput) (Result, error) {
	return s.execute(ctx, req, lk, &refundOp{s: s, orderID: orderID, in: in})
}

type refundOp struct {
	s       *Service
	orderID string // public
	in      RefundInput
}

func (r *refundOp) Spec() FingerprintSpec { return r.s.cfg.Routes.Refund }

// claim runs in a transaction: refunds are not the hot path, and their claim has checks
// (the order exists, is paid, has room) that one statement would make hard to read.
func (r *refundOp) Claim(ctx context.Context, k *Key) (*Key, bool, error) {
	return claimRefund(ctx, r.s.db, k, r.orderID, r.in)
}

func (r *refundOp) Run(ctx context.Context, k *Key, resumed bool) (Response, error) {
	pk := providerKey("refund", k)
	ref, err := loadRefund(ctx, r.s.db, k.RefundID.Int64)
	if err != nil {
		return Response{}, err
	}
	k.OrderPublicID, k.RefundPublicID = ref.OrderPublicID, ref.PublicID
	pctx, cancel := context.WithTimeout(ctx, r.s.cfg.ProviderTimeout)
	defer cancel()
	var pr psp.Refund
	if resumed {
		pr, err = r.s.provider.LookupRefund(pctx, pk)
	}
	op := psp.OpLookupRefund
	if !resumed || psp.AnswerOf(psp.OpLookupRefund, err).Verdict == psp.VerdictNone {
		op = psp.OpRefund
		pr, err = r.s.provider.Refund(pctx, psp.RefundRequest{
			Key: pk, ChargeID: ref.ChargeID, Amount: ref.Amount, Reason: ref.Reason.String,
		})
	}
	if a := psp.AnswerOf(op, err); a.Verdict == psp.VerdictRefused || a.Verdict == psp.VerdictLookUp {
		settle, lerr := r.s.refusedRefund(ctx, pctx, ref, a, err)
		if settle == nil {
			return r.s.providerFailed(ctx, k, psp.OpLookupCharge, lerr)
		}
		var resp Response
		err := inTx(ctx, r.s.db, "settle a refused refund", func(tx *sqlx.Tx) error {
			var err error
			resp, err = settle(tx, k)
			return err
		})
		return resp, err
	}
	if err != nil {
		return r.s.providerFailed(ctx, k, op, err)
	}
	resp, err := refundResponse(ref)
	if err != nil {
		return Response{}, err
	}
	if err := completeRefund(ctx, r.s.q, k, resp, r.s.cfg.Now(), pr.ID); err != nil {
		return Response{}, err
	}
	return resp, nil
}

// refundResponse is the 201 of a refund the provider made: what its key stores and replays.
// No Location: the API, which knows its routes, adds it (GET /v1/orders/{id}/refunds/{rid}
// answers the same body).
func refundResponse(ref refund) (Response, error) {
	body, err := json.Marshal(ref.view("succeeded"))
	if err != nil {
		return Response{}, fmt.Errorf("encode refund: %w", err)
	}
	return Response{Status: http.StatusCreated, Body: body, Header: map[string]string{
		"Content-Type": "application/json",
	}}, nil
}
