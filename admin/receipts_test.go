package admin_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/receipts"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/views"
)

// recordReceipt makes the receipt of an order.paid event as the outbox's handler would,
// with no SMTP server configured (kept), and returns the event's id.
func recordReceipt(t *testing.T, e *apptest.Env, order string) string {
	t.Helper()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	ev := "evt_" + hex.EncodeToString(b)
	tx, err := e.DB.DB.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	rc := &receipts.Recorder{From: "Shop <receipts@shop.example>"}
	if id, _, err := rc.Record(context.Background(), tx, ev, receipts.KindPaid, order, ""); err != nil || id == 0 {
		t.Fatalf("record receipt of %s: %d %v", order, id, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestReceiptsPage: without an SMTP server, receipts are kept and listed; narrowing to a
// client shows none of another client's; a receipt's page shows its text and its HTML as
// text, and its HTML on its own only under a sandboxing policy; the order's page links to
// its receipts.
func TestReceiptsPage(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	mine := pay(t, e, payment{key: "rcpt-1", item: "Latte", amount: 4500, email: "ayse@example.com"})
	ev := recordReceipt(t, e, mine)

	var other int64
	var theirs string
	if err := e.DB.Get(&other, `INSERT INTO clients (name, secret_hash) VALUES ('Other shop', sha256('other')) RETURNING id`); err != nil {
		t.Fatal(err)
	}
	if err := e.DB.Get(&theirs, `
		INSERT INTO orders (client_id, status, amount, currency, items, customer_email, captured_amount, created_at, updated_at)
		VALUES ($1, 'paid', 100, 'TRY', '[{"sku":"X","name":"<script>alert(1)</script>","quantity":1,"unit_amount":100}]',
		        'mehmet@example.com', 100, now(), now()) RETURNING public_id`, other); err != nil {
		t.Fatal(err)
	}
	theirEv := recordReceipt(t, e, theirs)
	// The rendered HTML escapes the item name; markup stored in the HTML itself stands for
	// whatever a future template or a bug might let through.
	if _, err := e.DB.Exec(`UPDATE receipts SET body_html = body_html || '<script>alert(2)</script>' WHERE event_id = $1`, theirEv); err != nil {
		t.Fatal(err)
	}

	all := b.do("GET", "/admin/receipts", nil)
	if all.status != http.StatusOK {
		t.Fatalf("receipts: %d %s", all.status, all.body)
	}
	if n := all.doc.Find("table.receipts tbody tr").Length(); n != 2 {
		t.Errorf("%d rows, want 2", n)
	}
	var pairs []string
	all.doc.Find("dl.counts dt").Each(func(_ int, dt *goquery.Selection) { pairs = append(pairs, dt.Text()+" "+dt.Next().Text()) })
	if counts := strings.Join(pairs, ", "); !strings.Contains(counts, "Kept (no SMTP server) 2") || !strings.Contains(counts, "Sent 0") {
		t.Errorf("counts %q", counts)
	}

	narrowed := b.do("GET", "/admin/receipts?client="+strconv.FormatInt(e.ClientID, 10), nil)
	if n := narrowed.doc.Find("table.receipts tbody tr").Length(); n != 1 ||
		!strings.Contains(narrowed.body, "ayse@example.com") || strings.Contains(narrowed.body, "mehmet@example.com") || strings.Contains(narrowed.body, theirs) {
		t.Errorf("narrowed to client %d: %d rows; another client's receipt shown or its own missing", e.ClientID, n)
	}
	if p := b.do("GET", "/admin/receipts?client=x", nil); p.status != http.StatusBadRequest {
		t.Errorf("client=x: %d", p.status)
	}

	one := b.do("GET", "/admin/receipts/"+theirEv, nil)
	if one.status != http.StatusOK {
		t.Fatalf("receipt: %d", one.status)
	}
	if strings.Contains(one.body, "<script>alert") || one.doc.Find("main [style]").Length() > 0 {
		t.Error("the receipt's HTML was put into the console page as markup")
	}
	if pre := one.doc.Find("pre.receipt-text").Text(); !strings.Contains(pre, "<script>alert(2)</script>") || !strings.Contains(pre, "&lt;script&gt;alert(1)") {
		t.Error("the receipt's text or HTML source is not shown")
	}
	if !strings.Contains(one.body, "&lt;"+theirEv+".receipt@shop.example&gt;") {
		t.Error("the Message-ID is not shown")
	}
	href, _ := one.doc.Find(`a[href$="/html"]`).Attr("href")
	preview := b.do("GET", href, nil)
	csp := preview.header.Get("Content-Security-Policy")
	if preview.status != http.StatusOK || !strings.HasPrefix(csp, "sandbox;") || strings.Contains(csp, "script-src") {
		t.Errorf("preview %q: %d, CSP %q", href, preview.status, csp)
	}
	if !strings.Contains(preview.body, "1.00 TRY") {
		t.Errorf("preview body: %s", preview.body)
	}
	if p := b.do("GET", "/admin/receipts/evt_nothing", nil); p.status != http.StatusNotFound {
		t.Errorf("unknown receipt: %d", p.status)
	}

	order := b.do("GET", "/admin/orders/"+mine, nil)
	link, ok := order.doc.Find(`a[href^="/admin/receipts?order="]`).Attr("href")
	if !ok {
		t.Fatal("the order's page does not link to its receipts")
	}
	if p := b.do("GET", link, nil); p.doc.Find("table.receipts tbody tr").Length() != 1 || !strings.Contains(p.body, ev) {
		t.Errorf("the order's receipts: %s", p.body)
	}
}

// TestRefusedReceiptsPage: receipts over a client's bounds are listed as refused, with when
// and why, narrowed to the client and to state=refused, counted apart, and the receipt's
// page says why it was not sent.
func TestRefusedReceiptsPage(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	made := time.Now().UTC().Truncate(time.Minute) // one minute for all three, whenever the test runs
	rc := &receipts.Recorder{From: "Shop <receipts@shop.example>", PerMinute: 2, PerDay: 100,
		Now: func() time.Time { return made }}
	var evs []string
	for i := range 3 {
		order := pay(t, e, payment{key: "refused-" + strconv.Itoa(i), item: "Latte", amount: 4500, email: "ayse@example.com"})
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		ev := "evt_" + hex.EncodeToString(b)
		tx, err := e.DB.DB.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := rc.Record(context.Background(), tx, ev, receipts.KindPaid, order, ""); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}

	p := b.do("GET", "/admin/receipts?state=refused&client="+strconv.FormatInt(e.ClientID, 10), nil)
	if p.status != http.StatusOK {
		t.Fatalf("refused receipts: %d %s", p.status, p.body)
	}
	rows := p.doc.Find("table.receipts tbody tr")
	if rows.Length() != 1 || !strings.Contains(rows.Text(), "refused") {
		t.Fatalf("%d rows: %s", rows.Length(), rows.Text())
	}
	if reason := rows.Find("td.refused-reason").Text(); !strings.Contains(reason, "rate_limited") {
		t.Errorf("the reason shown is %q", reason)
	}
	if made := rows.Find("td").First().Text(); strings.TrimSpace(made) == "" {
		t.Error("no time shown")
	}
	if href, _ := rows.Find("a").First().Attr("href"); href != "/admin/receipts/"+evs[2] {
		t.Errorf("the row links to %q, want the third receipt", href)
	}
	var pairs []string
	p.doc.Find("dl.counts dt").Each(func(_ int, dt *goquery.Selection) { pairs = append(pairs, dt.Text()+" "+dt.Next().Text()) })
	if counts := strings.Join(pairs, ", "); !strings.Contains(counts, "Refused (over the client's bounds) 1") || !strings.Contains(counts, "Kept (no SMTP server) 2") {
		t.Errorf("counts %q", counts)
	}

	one := b.do("GET", "/admin/receipts/"+evs[2], nil)
	if one.status != http.StatusOK || !strings.Contains(one.doc.Find("dd.refused-reason").Text(), "rate_limited") {
		t.Errorf("the receipt's page: %d, reason %q", one.status, one.doc.Find("dd.refused-reason").Text())
	}
	if other := b.do("GET", "/admin/receipts?state=refused&client=999999", nil); other.doc.Find("table.receipts tbody tr").Length() != 0 {
		t.Error("another client's filter lists the refused receipt")
	}
}

// A receipt of a client in Istanbul writes its times on Istanbul's clocks, named, and its
// console page shows the receipt's times in the same zone, whatever the operator's own:
// the page reads as the customer's message does.
func TestReceiptPageInTheClientsZone(t *testing.T) {
	e := apptest.New(t)
	if _, err := e.DB.Exec(`UPDATE clients SET time_zone = 'Europe/Istanbul' WHERE id = $1`, e.ClientID); err != nil {
		t.Fatal(err)
	}
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	order := pay(t, e, payment{key: "rcpt-ist", item: "Simit", amount: 1500, email: "ayse@example.com"})
	ev := recordReceipt(t, e, order)
	var paid, made time.Time
	if err := e.DB.Get(&paid, `SELECT p.created_at FROM payments p JOIN orders o ON o.id = p.order_id WHERE o.public_id = $1`, order); err != nil {
		t.Fatal(err)
	}
	if err := e.DB.Get(&made, `SELECT created_at FROM receipts WHERE event_id = $1`, ev); err != nil {
		t.Fatal(err)
	}
	istanbul, _ := time.LoadLocation("Europe/Istanbul")
	p := b.do("GET", "/admin/receipts/"+ev, nil)
	text := p.doc.Find("pre.receipt-text").First().Text()
	if want := paid.In(istanbul).Format("2 January 2006 15:04") + " Europe/Istanbul"; !strings.Contains(text, want) {
		t.Errorf("the receipt's text does not say %q:\n%s", want, text)
	}
	if strings.Contains(text, " UTC") {
		t.Errorf("the receipt's text writes UTC:\n%s", text)
	}
	shown := strings.Join(strings.Fields(p.doc.Find("dl.facts dd time").First().Text()), " ")
	if want := made.In(istanbul).Format(views.TimeLayout) + " Europe/Istanbul"; shown != want {
		t.Errorf("the page shows the receipt made at %q, want %q", shown, want)
	}
}
