package admin_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// caseEnv is tekrar with its provider inbox on, and the provider's signing key.
func caseEnv(t *testing.T) (*apptest.Env, stdwebhook.Key) {
	t.Helper()
	secret := stdwebhook.NewSecret()
	e := apptest.New(t, func(c *config.Server) { c.PSPWebhookSecrets = secret })
	k, err := stdwebhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	return e, k
}

// paidOrder pays amount under key as the client of secret, and returns the order's public id.
func paidOrder(t *testing.T, e *apptest.Env, secret, key string, amount int64) string {
	t.Helper()
	body := fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"X","name":"Latte","quantity":1,"unit_amount":%d}],"amount":%d,
		"payment":{"card_token":"tok_visa"}}`, amount, amount)
	r := e.Do(t, "POST", "/v1/orders", secret, []byte(body), "Idempotency-Key", key)
	if r.Status != 201 {
		t.Fatalf("order %s: %d %s", key, r.Status, r.Body)
	}
	var o struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.Body, &o); err != nil {
		t.Fatal(err)
	}
	return o.ID
}

// disputeEvent delivers, signed with k, the provider's event of d on the charge the sandbox
// made for order: dispute.created while d is open, dispute.closed once decided.
func disputeEvent(t *testing.T, e *apptest.Env, k stdwebhook.Key, order string, seq int, d psp.Dispute) {
	t.Helper()
	var c struct {
		ID          string `db:"id"`
		Key         string `db:"key"`
		Amount      int64  `db:"amount"`
		Currency    string `db:"currency"`
		Description string `db:"description"`
	}
	if err := e.DB.Get(&c, `
		SELECT ch.id, ch.key, ch.amount, ch.currency, ch.description
		  FROM psp_charges ch JOIN payments p ON p.provider_charge_id = ch.id JOIN orders o ON o.id = p.order_id
		 WHERE o.public_id = $1`, order); err != nil {
		t.Fatalf("the ledger's charge of %s: %v", order, err)
	}
	d.ChargeID = c.ID
	typ := psp.EventDisputeCreated
	if d.Status != psp.DisputeOpen {
		typ = psp.EventDisputeClosed
	}
	ev := psp.Event{ID: fmt.Sprintf("evt_%s_%d", d.ID, seq), Type: typ, Created: time.Now().UTC(), Data: psp.EventData{
		ChargeID: c.ID, ChargeKey: c.Key, Description: c.Description, Sequence: seq, Amount: c.Amount,
		Currency: c.Currency, Status: psp.StatusSucceeded, Dispute: &d}}
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", e.URL+"/webhooks/psp", bytes.NewReader(body))
	req.Header = stdwebhook.Headers(ev.ID, time.Now(), body, k)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("deliver %s: %d", ev.ID, resp.StatusCode)
	}
}

// column returns the text of each row's cells of class-less column i of table sel.
func column(p page, sel string, i int) []string {
	var out []string
	p.doc.Find(sel + " tbody tr").Each(func(_ int, tr *goquery.Selection) {
		out = append(out, strings.TrimSpace(tr.Find("td").Eq(i).Text()))
	})
	return out
}

// The disputes queue: open disputes first, the longest open first, each with its amount,
// reason, age, order and charge; a status narrows it to decided ones, a client to its own.
// The order's page and the key's page link to the dispute's row, and the overview counts the
// open ones. Disputes reach tekrar as the provider's signed events, through its inbox.
func TestDisputesQueue(t *testing.T) {
	e, k := caseEnv(t)
	otherSecret, otherID := e.NewClient(t, "other app")
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	now := time.Now().UTC()
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	closedAt := func(d time.Duration) *time.Time { t := ago(d); return &t }
	evil := `<script>alert(1)</script>`
	orders := map[string]string{}
	for _, o := range []struct {
		secret, key string
		amount      int64
	}{{e.Secret, "k-old", 4500}, {e.Secret, "k-new", 3000}, {e.Secret, "k-won", 2000}, {e.Secret, "k-lost", 1000}, {otherSecret, "k-other", 5000}} {
		orders[o.key] = paidOrder(t, e, o.secret, o.key, o.amount)
	}
	for _, d := range []struct {
		key     string
		dispute psp.Dispute
		closed  string    // "": still open
		at      time.Time // when decided
	}{
		{"k-old", psp.Dispute{ID: "dp_old", Amount: 4500, Reason: evil, Created: ago(3 * time.Hour)}, "", time.Time{}},
		{"k-new", psp.Dispute{ID: "dp_new", Amount: 3000, Reason: "product not received", Created: ago(time.Hour)}, "", time.Time{}},
		{"k-won", psp.Dispute{ID: "dp_won", Amount: 2000, Reason: "duplicate", Created: ago(5 * time.Hour)}, psp.DisputeWon, *closedAt(30 * time.Minute)},
		{"k-lost", psp.Dispute{ID: "dp_lost", Amount: 1000, Reason: "fraudulent", Created: ago(6 * time.Hour)}, psp.DisputeLost, *closedAt(2 * time.Hour)},
		{"k-other", psp.Dispute{ID: "dp_other", Amount: 5000, Reason: "unrecognized", Created: ago(2 * time.Hour)}, "", time.Time{}},
	} {
		d.dispute.Status = psp.DisputeOpen
		disputeEvent(t, e, k, orders[d.key], 2, d.dispute)
		if d.closed != "" {
			d.dispute.Status, d.dispute.Closed = d.closed, &d.at
			disputeEvent(t, e, k, orders[d.key], 3, d.dispute)
		}
	}

	mine, other := strconv.FormatInt(e.ClientID, 10), strconv.FormatInt(otherID, 10)
	tests := []struct {
		query string
		want  []string // dispute ids, in order
	}{
		{"", []string{"dp_old", "dp_other", "dp_new"}},
		{"?status=open", []string{"dp_old", "dp_other", "dp_new"}},
		{"?status=won", []string{"dp_won"}},
		{"?status=lost", []string{"dp_lost"}},
		{"?status=all", []string{"dp_old", "dp_other", "dp_new", "dp_won", "dp_lost"}},
		{"?client=" + mine, []string{"dp_old", "dp_new"}},
		{"?client=" + other, []string{"dp_other"}},
		{"?status=all&client=" + other, []string{"dp_other"}},
		{"?status=lost&client=" + other, nil},
		{"?status=all&order=" + orders["k-won"], []string{"dp_won"}},
	}
	for _, tt := range tests {
		p := b.do("GET", "/admin/disputes"+tt.query, nil)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d %s", tt.query, p.status, p.body)
		}
		if got := column(p, "table.disputes", 0); strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("disputes%s: %v, want %v", tt.query, got, tt.want)
		}
	}

	p := b.do("GET", "/admin/disputes", nil)
	if got := p.doc.Find("#open-disputes").Text(); got != "3" {
		t.Errorf("open disputes counted %q, want 3", got)
	}
	row := p.doc.Find("tr#dispute-dp_old")
	cells := func(s *goquery.Selection) []string {
		var out []string
		s.Find("td").Each(func(_ int, td *goquery.Selection) { out = append(out, strings.TrimSpace(td.Text())) })
		return out
	}
	got := cells(row)
	if len(got) != 10 || got[1] != "open" || got[2] != "45.00 TRY" || got[3] != evil || got[4] != "3 h" {
		t.Errorf("dp_old's row: %q", got)
	}
	if strings.Contains(p.body, evil) {
		t.Error("a dispute's reason was rendered as markup")
	}
	orderLink, _ := row.Find("a.order").Attr("href")
	if orderLink != "/admin/orders/"+orders["k-old"] {
		t.Errorf("dp_old links its order at %q", orderLink)
	}
	chargeLink, _ := row.Find("td").Eq(9).Find("a").Attr("href")
	if !strings.HasPrefix(chargeLink, "/admin/inbox?charge=ch_") {
		t.Errorf("dp_old links its charge at %q", chargeLink)
	}
	for _, href := range []string{orderLink, chargeLink} {
		if q := b.do("GET", href, nil); q.status != http.StatusOK {
			t.Errorf("GET %s: %d", href, q.status)
		}
	}
	// The charge's events in the inbox link back to the order.
	if inbox := b.do("GET", chargeLink, nil); inbox.doc.Find(`table.inbox a.order[href="`+orderLink+`"]`).Length() != 1 {
		t.Errorf("the inbox rows of dp_old's charge do not link its order: %s", inbox.body)
	}
	decided := cells(b.do("GET", "/admin/disputes?status=all", nil).doc.Find("tr#dispute-dp_won"))
	if len(decided) != 10 || decided[1] != "won" || decided[4] != "4 h 30 min" {
		t.Errorf("dp_won's row: %q", decided)
	}

	// The order's page and the key's page link to the dispute's row in the queue.
	for _, from := range []string{"/admin/orders/" + orders["k-old"], keyPath(e, "k-old")} {
		q := b.do("GET", from, nil)
		var hrefs []string
		q.doc.Find(`a[href*="/admin/disputes?"]`).Each(func(_ int, a *goquery.Selection) {
			h, _ := a.Attr("href")
			hrefs = append(hrefs, h)
		})
		if len(hrefs) != 1 {
			t.Fatalf("%s links the disputes %v, want once", from, hrefs)
		}
		u, _ := url.Parse(hrefs[0])
		to := b.do("GET", u.RequestURI(), nil)
		if to.status != http.StatusOK || to.doc.Find("tr#"+u.Fragment).Length() != 1 || u.Fragment != "dispute-dp_old" {
			t.Errorf("%s links %s: %d, row #%s present: %d", from, hrefs[0], to.status, u.Fragment, to.doc.Find("tr#"+u.Fragment).Length())
		}
	}
	if key := b.do("GET", keyPath(e, "k-old"), nil); !strings.Contains(key.doc.Find("dl.fields").Text(), "dp_old open: 45.00 TRY") {
		t.Errorf("the key page does not show its order's dispute")
	}

	// The overview counts the open disputes and links the queue.
	home := b.do("GET", "/admin", nil)
	stat := home.doc.Find(`ul.stats a[href="/admin/disputes?status=open"]`)
	if !strings.Contains(stat.Text(), "3 open disputes") {
		t.Errorf("overview: %q", stat.Text())
	}

	// What cannot be a filter is said beside the form.
	for _, q := range []string{"?status=maybe", "?client=x", "?order=ord_nope", "?after=!!"} {
		bad := b.do("GET", "/admin/disputes"+q, nil)
		if bad.status != http.StatusBadRequest || strings.TrimSpace(bad.doc.Find("[role=alert]").Text()) == "" {
			t.Errorf("disputes%s: %d, alert %q", q, bad.status, bad.doc.Find("[role=alert]").Text())
		}
	}
	// Signed out, the queue sends to the sign-in page.
	if out := newBrowser(t, e).do("GET", "/admin/disputes", nil); out.status != http.StatusSeeOther ||
		!strings.HasPrefix(out.header.Get("Location"), "/admin/login?next=") {
		t.Errorf("signed out: %d %q", out.status, out.header.Get("Location"))
	}
}
