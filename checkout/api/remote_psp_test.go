package api_test

import (
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// The same guarantees hold when the provider is a remote service with its own database, as
// `tekrar psp` and TEKRAR_PSP_URL run it.
func TestProviderOverHTTP(t *testing.T) {
	ledger := dbtest.New(t)
	srv := httptest.NewServer(psp.NewHandler(psp.NewSandbox(ledger, psp.SandboxOptions{}), slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	e := apptest.New(t, func(c *config.Server) {
		c.PSPURL = srv.URL
		c.ProviderTimeout = 300 * time.Millisecond
	})
	charges := func() int {
		t.Helper()
		var n int
		if err := ledger.Get(&n, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); err != nil {
			t.Fatal(err)
		}
		return n
	}

	first := postOrder(t, e, e.Secret, "k-remote", orderBody(9000, "tok_visa"))
	again := postOrder(t, e, e.Secret, "k-remote", orderBody(9000, "tok_visa"))
	if first.Status != 201 || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
		t.Fatalf("first %d, replay %d %s", first.Status, again.Status, again.Body)
	}
	if charges() != 1 || count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`) != 0 {
		t.Fatal("the charge is not in the remote ledger alone")
	}

	r := postOrder(t, e, e.Secret, "k-remote-timeout", orderBody(5000, "tok_timeout"))
	problemOf(t, r, 503, "payment_pending")
	if charges() != 2 {
		t.Fatal("tok_timeout did not charge")
	}
	if r := postOrder(t, e, e.Secret, "k-remote-timeout", orderBody(5000, "tok_timeout")); r.Status != 201 {
		t.Fatalf("retry after timeout: %d %s", r.Status, r.Body)
	}
	if charges() != 2 {
		t.Fatal("the retry charged again")
	}

	problemOf(t, postOrder(t, e, e.Secret, "k-remote-declined", orderBody(5000, "tok_declined")), 402, "payment_declined")

	id := decodeOrder(t, first).ID
	if r, err := refund(e, e.Secret, id, "k-remote-refund", 1000); err != nil || r.Status != 201 {
		t.Fatalf("refund: %d %s %v", r.Status, r.Body, err)
	}
	var refunded int
	if err := ledger.Get(&refunded, `SELECT coalesce(sum(amount), 0) FROM psp_refunds`); err != nil || refunded != 1000 {
		t.Fatalf("remote ledger refunded %d (%v)", refunded, err)
	}
}
