// Package api is the mobile API under /v1. Its handlers stay thin: decode the request, call
// the checkout domain, encode the answer. Every error leaves as a problem.
package api

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/catalog"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/internal/server"
)

// Deps is what the API needs from the process that serves it.
type Deps struct {
	Logger        *slog.Logger
	Authenticator *clients.Authenticator
	Service       *checkout.Service
	MaxBodyBytes  int64
	// Endpoints keeps the client's webhook endpoints.
	Endpoints *deliveries.Store
	// Catalog keeps the client's products and carts.
	Catalog *catalog.Store
}

type handlers struct {
	logger    *slog.Logger
	svc       *checkout.Service
	catalog   *catalog.Store
	endpoints *deliveries.Store
	maxBody   int64
}

// Register mounts the API on g (the /v1 group).
func Register(g *gin.RouterGroup, d Deps) {
	a := &handlers{logger: d.Logger, svc: d.Service, catalog: d.Catalog, endpoints: d.Endpoints, maxBody: d.MaxBodyBytes}
	// Registered before the group's middleware, which gin applies only to the routes
	// registered after it: the document needs no credentials.
	g.GET("/openapi.json", serveOpenAPI)
	g.Use(server.PlainText(keyedAdvice), authenticate(d.Authenticator, d.Logger))
	g.GET("/client", whoami)
	g.POST("/orders", a.createOrder)
	g.GET("/orders", a.listOrders)
	g.GET("/orders/:id", a.getOrder)
	g.POST("/orders/:id/refunds", a.createRefund)
	g.GET("/orders/:id/refunds", a.listRefunds)
	g.GET("/orders/:id/refunds/:rid", a.getRefund)
	g.GET("/idempotency-keys/:key", a.keyStatus)
	g.PUT("/products/:sku", a.putProduct)
	g.GET("/products", a.listProducts)
	g.GET("/products/:sku", a.getProduct)
	g.PUT("/carts/:id", a.putCart)
	g.GET("/carts/:id", a.getCart)
	g.DELETE("/carts/:id", a.deleteCart)
	g.POST("/pos/sales", a.createSales)
	g.POST("/webhook-endpoints", a.createEndpoint)
	g.GET("/webhook-endpoints", a.listEndpoints)
	g.GET("/webhook-endpoints/:id", a.getEndpoint)
	g.DELETE("/webhook-endpoints/:id", a.deleteEndpoint)
	g.POST("/webhook-endpoints/:id/rotate-secret", a.rotateEndpointSecret)
	g.POST("/webhook-endpoints/:id/resend", a.resendEndpoint)
}

// whoami lets an app or an operator check which client a secret belongs to.
func whoami(c *gin.Context) {
	cl := client(c)
	c.JSON(http.StatusOK, gin.H{"id": cl.ID, "name": cl.Name, "key_ttl_seconds": int64(cl.KeyTTL.Seconds()),
		"provider_customer_prefix": cl.ProviderCustomerPrefix})
}

func (a *handlers) keyStatus(c *gin.Context) {
	v, err := a.svc.KeyStatus(c.Request.Context(), client(c).ID, c.Param("key"))
	if err != nil {
		a.failRead(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}
