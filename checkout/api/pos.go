package api

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
)

// saleBatchBody is the body of POST /v1/pos/sales. Each sale's order is kept as sent: it
// is decoded strictly on its own, and fingerprinted as the body of POST /v1/orders, so
// that one sale that cannot be decoded is that sale's outcome, not the batch's.
type saleBatchBody struct {
	BatchKey string                 `json:"batch_key"`
	Register checkout.RegisterInput `json:"register"`
	Sales    []saleBody             `json:"sales"`
}

type saleBody struct {
	IdempotencyKey string          `json:"idempotency_key"`
	SoldAt         string          `json:"sold_at"`
	Order          json.RawMessage `json:"order"`
}

// createSales: POST /v1/pos/sales, a register's batch of offline sales. The batch needs no
// Idempotency-Key of its own: each sale has its key, and a batch resent is answered sale
// by sale. A batch over the limits is refused whole before anything runs; otherwise the
// answer is 200 with one outcome per sale, in input order (docs/pos.md).
func (a *handlers) createSales(c *gin.Context) {
	if c.Request.ContentLength > checkout.MaxBatchBytes {
		server.Abort(c, batchTooLarge())
		return
	}
	body, p := readJSON(c.Request, checkout.MaxBatchBytes)
	if p != nil {
		if p.Code == problem.CodeBodyTooLarge {
			p = batchTooLarge()
		}
		a.failRead(c, p)
		return
	}
	var in saleBatchBody
	if p := decodeStrict(body, &in); p != nil {
		a.failRead(c, p)
		return
	}
	if len(in.Sales) > checkout.MaxBatchSales {
		server.Abort(c, batchTooLarge())
		return
	}
	b := checkout.SaleBatch{Client: client(c), BatchKey: in.BatchKey, Register: in.Register,
		Sales: make([]checkout.Sale, len(in.Sales)),
		Meta:  checkout.Meta{RequestID: server.RequestID(c), RemoteAddr: c.ClientIP(), UserAgent: c.Request.UserAgent()}}
	if errs := b.Validate(); len(errs) > 0 {
		a.failRead(c, checkout.ValidationFailed(errs))
		return
	}
	for i, s := range in.Sales {
		sl := &b.Sales[i]
		sl.Key, sl.SoldAt, sl.Body = s.IdempotencyKey, s.SoldAt, s.Order
		if len(s.Order) == 0 || string(s.Order) == "null" {
			sl.Invalid = checkout.ValidationFailed([]checkout.FieldError{{Field: "order", Message: "is required"}})
		} else if p := decodeStrict(s.Order, &sl.Order); p != nil {
			sl.Invalid = p
		}
	}
	out, err := a.svc.SellBatch(c.Request.Context(), b)
	if err != nil {
		a.failRead(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"batch_key": in.BatchKey, "sales": out})
}

func batchTooLarge() *problem.Problem {
	return problem.Of(problem.CodeBatchTooLarge).
		WithDetail("send at most 500 sales and 4 MiB in one batch; nothing of this batch ran").
		With("max_sales", checkout.MaxBatchSales).With("max_bytes", checkout.MaxBatchBytes)
}
