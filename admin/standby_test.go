package admin_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// onPair serves tekrar on pair's primary with TEKRAR_READ_DATABASE_URL naming pair's standby,
// as `tekrar serve` wires it (app.New opens the read pool).
func onPair(t *testing.T, pair dbtest.Pair) *apptest.Env {
	t.Helper()
	cfg := apptest.Defaults(t)
	cfg.ReadDatabaseURL = pair.StandbyURL
	a, err := app.New(cfg, pair.Primary, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	e := &apptest.Env{URL: srv.URL, DB: pair.Primary, DBURL: pair.PrimaryURL, Config: cfg, App: a, HTTP: &http.Client{}}
	e.Secret, e.ClientID = e.NewClient(t, "test app")
	return e
}

// readFrom is the line a page shows under its header of where it read.
func readFrom(p page) string { return strings.TrimSpace(p.doc.Find(".read-from").Text()) }

// With the read URL on a real streaming standby, the console's pages read there and say how
// far behind it is, and what the primary wrote shows once replayed; with replay paused, a
// page lacks the newer order (not an error) and shows a lag in seconds. Meanwhile everything
// that writes runs on the primary, where the standby would refuse it (25006): the sign-in and
// its session, an order through the API, and a refund from the console, whose form reads the
// order on the primary too (the order's own page, on the standby, does not have it yet).
func TestConsoleReadsAStandby(t *testing.T) {
	pair := dbtest.NewPair(t)
	e := onPair(t, pair)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	first := actOrder(t, e, "k-first", 9000)
	e.App.Service.FlushHistory()
	pair.CatchUp(t)

	p := b.do("GET", "/admin/orders", nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, first) {
		t.Fatalf("orders page after replay: %d, order %s shown: %v", p.status, first, strings.Contains(p.body, first))
	}
	if line := readFrom(p); !strings.HasPrefix(line, "read from a standby, ") {
		t.Errorf("orders page says %q of where it read", line)
	}
	if k := b.do("GET", keyPath(e, "k-first"), nil); k.status != http.StatusOK || readFrom(k) == "" ||
		k.doc.Find(".timeline, table").Length() == 0 {
		t.Errorf("key page: %d, says %q", k.status, readFrom(k))
	}
	if a := b.do("GET", "/admin/audit", nil); a.status != http.StatusOK || readFrom(a) != "" {
		t.Errorf("audit page (read on the primary): %d, says %q", a.status, readFrom(a))
	}

	ctx := context.Background()
	if _, err := pair.Standby.ExecContext(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pair.Standby.Exec(`SELECT pg_wal_replay_resume()`) })
	second := actOrder(t, e, "k-second", 4500)
	deadline := time.Now().Add(10 * time.Second)
	for {
		p = b.do("GET", "/admin/orders", nil)
		if strings.HasSuffix(readFrom(p), " s behind") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p.status != http.StatusOK || !strings.HasSuffix(readFrom(p), " s behind") {
		t.Errorf("orders page with replay paused: %d, says %q; want a lag in seconds", p.status, readFrom(p))
	}
	if strings.Contains(p.body, second) || !strings.Contains(p.body, first) {
		t.Errorf("orders page with replay paused: first shown %v, unreplayed second shown %v",
			strings.Contains(p.body, first), strings.Contains(p.body, second))
	}
	if o := b.do("GET", "/admin/orders/"+second, nil); o.status != http.StatusNotFound {
		t.Errorf("the unreplayed order's page on the standby: %d, want 404", o.status)
	}

	refundPage := "/admin/orders/" + second + "/refund"
	confirm := b.do("GET", refundPage, nil)
	if confirm.status != http.StatusOK || readFrom(confirm) != "" {
		t.Fatalf("refund form (read on the primary): %d, says %q", confirm.status, readFrom(confirm))
	}
	r := b.do("POST", refundPage, actForm(t, confirm, refundPage, "reason", "read on a standby"))
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/admin/orders/"+second+"?done=refunded" {
		t.Fatalf("refund from the console: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	if n := actInt(t, e, `SELECT count(*) FROM refunds r JOIN orders o ON o.id = r.order_id WHERE o.public_id = $1`, second); n != 1 {
		t.Errorf("%d refunds of %s on the primary, want 1", n, second)
	}

	if _, err := pair.Standby.ExecContext(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	pair.CatchUp(t)
	if p = b.do("GET", "/admin/orders", nil); !strings.Contains(p.body, second) {
		t.Errorf("orders page after replay resumed lacks %s", second)
	}
	if o := b.do("GET", "/admin/orders/"+second, nil); o.status != http.StatusOK {
		t.Errorf("the order's page after replay: %d, want 200", o.status)
	}
}
