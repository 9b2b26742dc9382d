package api_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// An endpoint whose name resolves to a forbidden address is refused with 422
// validation_failed naming url, and the problem does not tell the client what the name
// resolves to: neither the address nor its range.
func TestForbiddenEndpointNameProblemTellsNotWhere(t *testing.T) {
	d := dbtest.New(t)
	sealer, err := deliveries.NewSealer(deliveries.NewSecretsKey())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]netip.Addr{
		"metadata.example":  netip.MustParseAddr("::a9fe:a9fe"),
		"loopback.example":  netip.MustParseAddr("::7f00:1"),
		"private.example":   netip.MustParseAddr("::a00:1"),
		"mapped.example":    netip.MustParseAddr("::ffff:169.254.169.254"),
		"nat64.example":     netip.MustParseAddr("64:ff9b::a9fe:a9fe"),
		"sixtofour.example": netip.MustParseAddr("2002:a9fe:a9fe::1"),
		"internal.example":  netip.MustParseAddr("10.20.30.40"),
	}
	policy := deliveries.Policy{Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{names[host]}, nil
	}}
	secret := clients.NewSecret()
	if _, err := clients.Create(context.Background(), d, "probing app", secret); err != nil {
		t.Fatal(err)
	}
	g := gin.New()
	api.Register(g.Group("/v1"), api.Deps{Logger: slog.New(slog.DiscardHandler), Authenticator: clients.NewAuthenticator(d, time.Minute),
		MaxBodyBytes: 1 << 20, Endpoints: &deliveries.Store{DB: d, Sealer: sealer, Policy: policy}})
	for name, addr := range names {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/v1/webhook-endpoints",
				bytes.NewReader([]byte(`{"url":"https://`+name+`/hooks","event_types":["order.paid"]}`)))
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, req)
			body := rec.Body.String()
			if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(body, `"validation_failed"`) || !strings.Contains(body, `"field":"url"`) ||
				!strings.Contains(body, "not allowed") {
				t.Fatalf("%d %s", rec.Code, body)
			}
			for _, leak := range []string{addr.String(), addr.Unmap().String(), "169.254", "10.20", "::/96", "/16", "/8", "range"} {
				if strings.Contains(body, leak) {
					t.Errorf("the problem tells %q: %s", leak, body)
				}
			}
		})
	}
	var n int
	if err := d.Get(&n, `SELECT count(*) FROM webhook_endpoints`); err != nil || n != 0 {
		t.Fatalf("%d endpoints stored (%v)", n, err)
	}
}
