package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
)

// begin does what every keyed POST does before the domain: read the key, then the body.
// It answers the request itself and returns ok=false when either is unusable; nothing is
// stored in that case, so the client may fix the request and resend it with the same key.
func (a *handlers) begin(c *gin.Context) (checkout.Request, keyed, bool) {
	var k keyed
	key, err := idempotencyKey(c.Request.Header)
	switch {
	case errors.Is(err, errKeyMissing):
		a.fail(c, k, problem.Of(problem.CodeIdempotencyKeyMissing).
			WithDetail("send one Idempotency-Key per intent (a UUID is a good choice) and reuse it on every retry"))
		return checkout.Request{}, k, false
	case err != nil:
		a.fail(c, k, problem.Of(problem.CodeIdempotencyKeyInvalid).
			WithDetail("send exactly one key of 1 to 255 visible ASCII characters"))
		return checkout.Request{}, k, false
	}
	k = keyed{key: key, raw: strings.TrimSpace(c.GetHeader("Idempotency-Key"))}
	body, p := readJSON(c.Request, a.maxBody)
	if p != nil {
		a.fail(c, k, p)
		return checkout.Request{}, k, false
	}
	return checkout.Request{
		Client: client(c),
		Key:    key,
		Method: c.Request.Method,
		Path:   c.Request.URL.Path,
		Body:   body,
		Wait:   preferWait(c.Request.Header),
		Meta: checkout.Meta{
			RequestID:  server.RequestID(c),
			RemoteAddr: c.ClientIP(),
			UserAgent:  c.Request.UserAgent(),
		},
	}, k, true
}

// input is the body of a keyed POST (checkout.OrderInput, checkout.RefundInput), decoded
// strictly and then validated.
type input[T any] interface {
	*T
	Validate() []checkout.FieldError
}

// ExecutedKey is set on a keyed request that reached the idempotency algorithm (after its
// key, body and validation were accepted): the request metrics tell a request refused
// before it from one the algorithm answered.
const ExecutedKey = "tekrar.keyed_executed"

// keyedPost is the protocol of every keyed POST, written once: begin (the key, then the
// body), replay, decode, validate, execute, write. A repeat of a completed request is
// answered from the replay before its body is decoded: one fingerprint and one SELECT.
// Anything else is decoded and validated (a body that fails changes nothing), and then
// executed with what the replay learnt (checkout.Lookup), so that a first arrival claims
// without looking its key up again.
//
// bind, when not nil, reads what the body names by reference into the request before its
// fingerprint is taken (an order's cart: checkout.Service.BindCart).
func keyedPost[T any, P input[T]](a *handlers, c *gin.Context, bind func(ctx context.Context, req *checkout.Request) error,
	execute func(ctx context.Context, req checkout.Request, lk checkout.Lookup, in T) (checkout.Result, error)) {
	req, k, ok := a.begin(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	if bind != nil {
		if err := bind(ctx, &req); err != nil {
			a.fail(c, k, err)
			return
		}
	}
	res, lk, replayed := a.svc.Replay(ctx, req)
	if replayed {
		writeResult(c, k, res)
		return
	}
	var in T
	if p := decodeStrict(req.Body, &in); p != nil {
		a.fail(c, k, p)
		return
	}
	if errs := P(&in).Validate(); len(errs) > 0 {
		a.fail(c, k, checkout.ValidationFailed(errs))
		return
	}
	c.Set(ExecutedKey, true)
	res, err := execute(ctx, req, lk, in)
	if err != nil {
		a.fail(c, k, err)
		return
	}
	writeResult(c, k, res)
}

func (a *handlers) createOrder(c *gin.Context) {
	keyedPost(a, c, a.svc.BindCart, a.svc.CreateOrder)
}

func (a *handlers) createRefund(c *gin.Context) {
	orderID := c.Param("id")
	if !checkout.ValidOrderID(orderID) {
		a.fail(c, keyed{}, checkout.ErrOrderNotFound) // with the advice every keyed request gets
		return
	}
	keyedPost(a, c, nil, func(ctx context.Context, req checkout.Request, lk checkout.Lookup, in checkout.RefundInput) (checkout.Result, error) {
		return a.svc.CreateRefund(ctx, req, lk, orderID, in)
	})
}

func (a *handlers) getOrder(c *gin.Context) {
	// Anything that is not an order's public id, an internal integer id included, is an
	// order that does not exist: 404, as for another client's order.
	v, err := a.svc.GetOrder(c.Request.Context(), client(c).ID, c.Param("id"))
	if err != nil {
		a.failRead(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

// listOrders: GET /v1/orders?customer_id=...&limit=...&after=... , newest first. The next
// page starts after the last id of this one (next_after, an order's public id).
func (a *handlers) listOrders(c *gin.Context) {
	customer := c.Query("customer_id")
	if customer == "" || len(customer) > 255 {
		a.failRead(c, checkout.ValidationFailed([]checkout.FieldError{{Field: "customer_id", Message: "is required (at most 255 characters)"}}))
		return
	}
	limit, errL := queryInt(c, "limit", 20)
	if errL != nil || limit < 1 || limit > 100 {
		a.failRead(c, checkout.ValidationFailed([]checkout.FieldError{{Field: "limit", Message: "must be 1 to 100"}}))
		return
	}
	orders, more, err := a.svc.ListOrders(c.Request.Context(), client(c).ID, customer, c.Query("after"), int(limit))
	if errors.Is(err, checkout.ErrBadCursor) {
		a.failRead(c, checkout.ValidationFailed([]checkout.FieldError{{Field: "after", Message: "must be the id of an order of this list (next_after of the previous page)"}}))
		return
	}
	if err != nil {
		a.failRead(c, err)
		return
	}
	out := gin.H{"data": orders, "has_more": more}
	if more {
		out["next_after"] = orders[len(orders)-1].ID
	}
	c.JSON(http.StatusOK, out)
}

func queryInt(c *gin.Context, name string, def int64) (int64, error) {
	v, ok := c.GetQuery(name)
	if !ok {
		return def, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// getRefund: GET /v1/orders/{id}/refunds/{rid}, where a created refund's Location points.
// Another client's order is order_not_found, as on GET /v1/orders/{id}.
func (a *handlers) getRefund(c *gin.Context) {
	v, err := a.svc.GetRefund(c.Request.Context(), client(c).ID, c.Param("id"), c.Param("rid"))
	if err != nil {
		a.failRead(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

// listRefunds: GET /v1/orders/{id}/refunds, all the order's refunds, oldest first.
func (a *handlers) listRefunds(c *gin.Context) {
	refunds, err := a.svc.ListRefunds(c.Request.Context(), client(c).ID, c.Param("id"))
	if err != nil {
		a.failRead(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"data": refunds})
}
