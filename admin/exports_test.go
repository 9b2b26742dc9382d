package admin_test

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// exportRows fetches a CSV export and reads it; the answer must be a CSV download.
func exportRows(t *testing.T, b *browser, path string) [][]string {
	t.Helper()
	p := b.do("GET", path, nil)
	if p.status != http.StatusOK || !strings.HasPrefix(p.header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(p.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("%s: %d %v\n%.300s", path, p.status, p.header, p.body)
	}
	r, err := csv.NewReader(strings.NewReader(p.body)).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, p.body)
	}
	return r
}

// Each list's export holds exactly the rows its page's filters select, in the page's order
// (all of them, not one page), under its header; the page links it with those filters; a
// time is RFC 3339 in UTC.
func TestListExports(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	pay(t, e, payment{key: "x-a1", customer: "cus_a", item: "Latte", amount: 4500})
	pay(t, e, payment{key: "x-b1", customer: "cus_b", item: "Tea", amount: 3000})
	pay(t, e, payment{key: "x-a2", customer: "cus_a", item: "Mocha", amount: 5000})
	start := time.Now().Add(-time.Hour)
	for i, ev := range []struct{ key, kind string }{
		{"k-c", "reused_conflict"}, {"k-c", "in_use_rejected"}, {"k-d", "reused_conflict"}, {"k-c", "reused_conflict"},
		{"k-r", "replayed"}, {"k-s", "replayed"}, {"k-r", "replayed"},
	} {
		if _, err := e.DB.Exec(`
			INSERT INTO key_events (at, client_id, key, kind, status, request_id, remote_addr, user_agent)
			VALUES ($1, $2, $3, $4, 409, $5, '198.51.100.4', '=cmd|x')`,
			start.Add(time.Duration(i)*time.Second), e.ClientID, ev.key, ev.kind, fmt.Sprint("req-x-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.DB.Exec(`
		INSERT INTO provider_events (provider, event_id, type, charge_id, sequence, body, outcome, received_at, deliveries, last_delivery_at)
		VALUES ('psp', 'evt_a1', 'charge.succeeded', 'ch_a', 1, '{}', 'applied', now() - interval '3 minutes', 3, now()),
		       ('psp', 'evt_a3', 'charge.refunded', 'ch_a', 3, '{}', 'applied', now() - interval '2 minutes', 1, now()),
		       ('psp', 'evt_a2', 'refund.succeeded', 'ch_a', 2, '{}', 'stale', now() - interval '1 minute', 1, now()),
		       ('psp', 'evt_b1', 'charge.succeeded', 'ch_b', 1, '{}', 'applied', now(), 1, now()),
		       ('psp', 'evt_c1', 'charge.failed', 'ch_c', 1, '{}', 'applied', now(), 1, now())`); err != nil {
		t.Fatal(err)
	}
	var endpoints [2]string
	for i := range endpoints {
		if err := e.DB.Get(&endpoints[i], `INSERT INTO webhook_endpoints (client_id, url, event_types, created_at)
			VALUES ($1, 'https://93.184.215.14/', '{order.paid}', now()) RETURNING public_id`, e.ClientID); err != nil {
			t.Fatal(err)
		}
	}
	for i, to := range []string{endpoints[0], endpoints[1], endpoints[0], endpoints[0]} {
		if _, err := e.DB.Exec(`INSERT INTO webhook_deliveries (event_id, event_type, endpoint_id, payload, created_at)
			SELECT $2, 'order.paid', id, '{}', now() - $3 * interval '1 second' FROM webhook_endpoints WHERE public_id = $1`,
			to, fmt.Sprint("evt_d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		page, export string // the list's page with its filters, and the export it links
		header       []string
		idColumn     int
		want         string // the ids the export must hold, in order
	}{
		{"/admin/orders?customer=cus_a", "/admin/orders.csv?customer=cus_a",
			[]string{"order_id", "created_at_utc", "client_id", "client", "customer_id", "customer_email", "amount", "currency",
				"status", "payment", "charge_id", "card_brand", "card_last4", "decline_code", "refunded_amount", "refunds", "keys"},
			0, `SELECT public_id::text FROM orders WHERE customer_id = 'cus_a' ORDER BY created_at DESC, id DESC`},
		{"/admin/keys?customer=cus_a", "/admin/keys.csv?customer=cus_a",
			[]string{"client_id", "client", "key", "state", "method", "path", "order_id", "refund_key", "response_status",
				"replays", "created_at_utc", "expires_at_utc"},
			2, `SELECT k.key FROM idempotency_keys k JOIN orders o ON o.id = k.order_id WHERE o.customer_id = 'cus_a'
			     ORDER BY k.created_at DESC, k.id DESC`},
		{"/admin/conflicts?kind=conflicts&key=k-c", "/admin/conflicts.csv?key=k-c&kind=conflicts", historyExportHeader,
			6, `SELECT request_id FROM key_events WHERE kind = 'reused_conflict' AND key = 'k-c' ORDER BY at DESC, id DESC`},
		{"/admin/conflicts?key=k-c&kind=", "/admin/conflicts.csv?key=k-c&kind=", historyExportHeader,
			6, `SELECT request_id FROM key_events WHERE kind = 'reused_conflict' AND key = 'k-c' ORDER BY at DESC, id DESC`},
		{"/admin/replays?key=k-r", "/admin/replays.csv?key=k-r", historyExportHeader,
			6, `SELECT request_id FROM key_events WHERE kind = 'replayed' AND key = 'k-r' ORDER BY at DESC, id DESC`},
		{"/admin/webhooks/" + endpoints[0], "/admin/webhooks/" + endpoints[0] + "/deliveries.csv",
			[]string{"endpoint_id", "event_id", "event_type", "order_id", "state", "attempts", "created_at_utc",
				"last_attempt_at_utc", "last_outcome", "last_status", "next_attempt_at_utc", "finished_at_utc"},
			1, `SELECT d.event_id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
			     WHERE w.public_id = '` + endpoints[0] + `' ORDER BY d.created_at DESC, d.id DESC`},
		{"/admin/inbox?charge=ch_a", "/admin/inbox.csv?charge=ch_a", inboxExportHeader,
			2, `SELECT event_id FROM provider_events WHERE charge_id = 'ch_a' ORDER BY received_at DESC, event_id`},
		{"/admin/inbox?q=charge.succeeded", "/admin/inbox.csv?q=charge.succeeded", inboxExportHeader,
			2, `SELECT event_id FROM provider_events WHERE type = 'charge.succeeded' ORDER BY received_at DESC, event_id`},
	} {
		page := tt.page
		if strings.Contains(page, "?") {
			page += "&after=" // the page's cursor, which the export link leaves out
		}
		p := b.do("GET", page, nil)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d", tt.page, p.status)
		}
		if href, _ := p.doc.Find(`p.export a[download]`).Attr("href"); href != tt.export {
			t.Errorf("%s links its export as %q, want %q", tt.page, href, tt.export)
		}
		var want []string
		if err := e.DB.Select(&want, tt.want); err != nil {
			t.Fatal(err)
		}
		if len(want) < 2 {
			t.Fatalf("%s: the fixture selects %d rows", tt.page, len(want))
		}
		rows := exportRows(t, b, tt.export)
		if strings.Join(rows[0], ",") != strings.Join(tt.header, ",") {
			t.Errorf("%s header: %v, want %v", tt.export, rows[0], tt.header)
		}
		var got []string
		for _, r := range rows[1:] {
			got = append(got, r[tt.idColumn])
			for i, name := range rows[0] {
				if strings.HasSuffix(name, "_utc") && r[i] != "" {
					if at, err := time.Parse(time.RFC3339Nano, r[i]); err != nil || !strings.HasSuffix(r[i], "Z") || at.IsZero() {
						t.Errorf("%s: %s is %q, not RFC 3339 in UTC", tt.export, name, r[i])
					}
				}
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s holds %v, want %v", tt.export, got, want)
		}
	}
	// A device starting with = is defused.
	if rows := exportRows(t, b, "/admin/replays.csv?key=k-s"); len(rows) != 2 || rows[1][8] != "'=cmd|x" {
		t.Errorf("replays.csv of k-s: %v", rows)
	}
}

var inboxExportHeader = []string{"received_at_utc", "provider", "event_id", "type", "charge_id", "order_id", "sequence",
	"outcome", "deliveries", "last_delivery_at_utc"}

var historyExportHeader = []string{"at_utc", "kind", "client_id", "client", "key", "order_id", "request_id", "remote_addr",
	"user_agent", "status", "stored_fingerprint", "sent_fingerprint", "differs", "stored_request", "sent_request", "note"}

// A filter the page refuses is refused by its export the same way: 400, the page's words,
// and no CSV.
func TestExportRefusesWhatThePageRefuses(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	for _, tt := range []struct{ page, query string }{
		{"/admin/orders", "last4=12"},
		{"/admin/orders", "from=yesterday"},
		{"/admin/keys", "state=sideways"},
		{"/admin/keys", "order=abc"},
		{"/admin/conflicts", "kind=x"},
		{"/admin/replays", "client=x"},
	} {
		page := b.do("GET", tt.page+"?"+tt.query, nil)
		if page.status != http.StatusBadRequest {
			t.Fatalf("%s?%s: %d, want 400", tt.page, tt.query, page.status)
		}
		said := strings.TrimSpace(page.doc.Find(`[role=alert]`).First().Text())
		x := b.do("GET", tt.page+".csv?"+tt.query, nil)
		if x.status != http.StatusBadRequest || strings.HasPrefix(x.header.Get("Content-Type"), "text/csv") {
			t.Errorf("%s.csv?%s: %d %s, want the 400 page", tt.page, tt.query, x.status, x.header.Get("Content-Type"))
			continue
		}
		if said == "" || !strings.Contains(x.doc.Find(".error-page").Text(), said) {
			t.Errorf("%s.csv?%s does not say %q", tt.page, tt.query, said)
		}
	}
}

// An export of more rows than a page of its list holds every row exactly once, read page
// after page: 1,200 orders, six pages of 200.
func TestExportReadsEveryPage(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	// Many orders created in the same microsecond, so that the cursor's tie-break is used.
	if _, err := e.DB.Exec(`
		INSERT INTO orders (client_id, status, amount, currency, items, customer_id, created_at, updated_at)
		SELECT $1, 'pending', 100 + i, 'TRY', '[]', 'cus_bulk', date_trunc('second', now()) - (i / 3) * interval '1 second', now()
		  FROM generate_series(1, 1200) i`, e.ClientID); err != nil {
		t.Fatal(err)
	}
	pay(t, e, payment{key: "x-other", customer: "cus_other", item: "Tea", amount: 3000})
	var want []string
	if err := e.DB.Select(&want, `SELECT public_id::text FROM orders WHERE customer_id = 'cus_bulk' ORDER BY created_at DESC, id DESC`); err != nil {
		t.Fatal(err)
	}
	rows := exportRows(t, b, "/admin/orders.csv?customer=cus_bulk")
	seen := make(map[string]bool, len(rows))
	var got []string
	for _, r := range rows[1:] {
		if seen[r[0]] {
			t.Errorf("order %s is exported twice", r[0])
		}
		seen[r[0]] = true
		got = append(got, r[0])
	}
	if len(got) != 1200 || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the export holds %d orders, want the 1200 of cus_bulk in the page's order", len(got))
	}
}
