package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/catalog"
)

// putProduct: PUT /v1/products/{sku}, the whole product. 201 when it created it, 200
// otherwise; ETag is the version it is at. No Idempotency-Key: a PUT is idempotent, and
// If-Match guards a replace against a change made since the client read the product.
func (a *handlers) putProduct(c *gin.Context) {
	conditionalPut(a, c, c.Param("sku"), a.catalog.PutProduct, func(v catalog.ProductView) int64 { return v.Version })
}

func (a *handlers) getProduct(c *gin.Context) {
	v, err := a.catalog.GetProduct(c.Request.Context(), client(c).ID, c.Param("sku"))
	if err != nil {
		a.failRead(c, err)
		return
	}
	c.Header("ETag", catalog.ETag(v.Version))
	c.JSON(http.StatusOK, v)
}

// listProducts: GET /v1/products?limit=...&after=..., in sku order; the next page starts
// after next_after, the last sku of this one.
func (a *handlers) listProducts(c *gin.Context) {
	limit, errL := queryInt(c, "limit", 20)
	if errL != nil || limit < 1 || limit > 100 {
		a.failRead(c, checkout.ValidationFailed([]checkout.FieldError{{Field: "limit", Message: "must be 1 to 100"}}))
		return
	}
	after := c.Query("after")
	if after != "" && !catalog.ValidSKU(after) {
		a.failRead(c, checkout.ValidationFailed([]checkout.FieldError{{Field: "after", Message: "must be a sku (next_after of the previous page)"}}))
		return
	}
	products, more, err := a.catalog.ListProducts(c.Request.Context(), client(c).ID, after, int(limit))
	if err != nil {
		a.failRead(c, err)
		return
	}
	out := gin.H{"data": products, "has_more": more}
	if more {
		out["next_after"] = products[len(products)-1].SKU
	}
	c.JSON(http.StatusOK, out)
}

// putCart: PUT /v1/carts/{id}, the cart's whole contents; the id is the client's. Like
// putProduct: 201 or 200, ETag, If-Match, no Idempotency-Key.
func (a *handlers) putCart(c *gin.Context) {
	conditionalPut(a, c, c.Param("id"), a.catalog.PutCart, func(v catalog.CartView) int64 { return v.Version })
}

func (a *handlers) getCart(c *gin.Context) {
	v, err := a.catalog.GetCart(c.Request.Context(), client(c).ID, c.Param("id"))
	if err != nil {
		a.failRead(c, err)
		return
	}
	c.Header("ETag", catalog.ETag(v.Version))
	c.JSON(http.StatusOK, v)
}

func (a *handlers) deleteCart(c *gin.Context) {
	if err := a.catalog.DeleteCart(c.Request.Context(), client(c).ID, c.Param("id"), precondition(c.Request.Header)); err != nil {
		a.failRead(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
