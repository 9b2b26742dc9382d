package admin_test

import (
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
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

const (
	evilAgent = `<script>alert("ua")</script>`
	evilLate  = `<script>late()</script>`
)

// evRequest is a keyed order request of the event page tests.
type evRequest struct {
	secret, key, agent, customer string
	amount                       int64
	card                         string // default tok_visa
}

// evSend sends an order through the API and returns the answer, whatever it is: the event
// pages are about repeats that are refused as much as those that are replayed.
func evSend(t *testing.T, e *apptest.Env, r evRequest) apptest.Response {
	t.Helper()
	if r.secret == "" {
		r.secret = e.Secret
	}
	if r.card == "" {
		r.card = "tok_visa"
	}
	if r.agent == "" {
		r.agent = "tekrar-pos/3.0"
	}
	body := fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"TEA","name":"Tea","quantity":1,"unit_amount":%d}],
		"amount":%d,"payment":{"card_token":%q},"customer":{"id":%q}}`, r.amount, r.amount, r.card, r.customer)
	return e.Do(t, "POST", "/v1/orders", r.secret, []byte(body), "Idempotency-Key", r.key, "User-Agent", r.agent)
}

// evOrderID is the id of the order a response describes.
func evOrderID(t *testing.T, r apptest.Response) string {
	t.Helper()
	var v struct{ ID string }
	if err := json.Unmarshal(r.Body, &v); err != nil || v.ID == "" {
		t.Fatalf("no order in %d %s", r.Status, r.Body)
	}
	return v.ID
}

// evSignIn starts tekrar, with a viewer signed in.
func evSignIn(t *testing.T, change ...func(*config.Server)) (*apptest.Env, *browser) {
	t.Helper()
	e := apptest.New(t, change...)
	newOperator(t, e, "viewer@example.com", admin.RoleViewer)
	b := newBrowser(t, e)
	if p := b.login("viewer@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("login: %d", p.status)
	}
	return e, b
}

// evGet loads a console page and checks its status.
func evGet(t *testing.T, b *browser, path string, status int) page {
	t.Helper()
	p := b.do("GET", path, nil)
	if p.status != status {
		t.Fatalf("GET %s: %d, want %d\n%s", path, p.status, status, p.body)
	}
	return p
}

// evKeys lists the keys of the rows of a list (#rows, or the section of id sel), in order.
func evKeys(p page, sel string) []string {
	return p.doc.Find(sel + " tbody tr").Map(func(_ int, s *goquery.Selection) string {
		return s.Find(`a[href^="/admin/keys/"] code`).Text()
	})
}

func evCount(keys []string, key string) int {
	n := 0
	for _, k := range keys {
		if k == key {
			n++
		}
	}
	return n
}

// evMinute formats a time as the filter form's datetime-local inputs send it (UTC).
func evMinute(t time.Time) string { return t.UTC().Format("2006-01-02T15:04") }

// evNoMarkup fails if a page carries user input as markup instead of text.
func evNoMarkup(t *testing.T, p page, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(p.body, s) {
			t.Errorf("%q rendered as markup", s)
		}
		if !strings.Contains(p.doc.Text(), s) {
			t.Errorf("%q not shown as text", s)
		}
	}
}

func TestEventPagesNeedSignIn(t *testing.T) {
	e := apptest.New(t)
	b := newBrowser(t, e)
	for _, path := range []string{"/admin/replays", "/admin/conflicts?kind=both", "/admin/expirations"} {
		p := b.do("GET", path, nil)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/admin/login?next="+url.QueryEscape(path) {
			t.Errorf("GET %s signed out: %d %s", path, p.status, p.header.Get("Location"))
		}
	}
}

func TestReplaysPage(t *testing.T) {
	e, b := evSignIn(t)
	otherSecret, otherID := e.NewClient(t, "kiosk")
	start := e.Clock.Now()

	// k-rep is replayed twice, the <script> key once, k-once never; the kiosk replays its
	// key three hours later.
	first := evSend(t, e, evRequest{key: "k-rep", customer: "cus_A", amount: 4500})
	repOrder := evOrderID(t, first)
	evSend(t, e, evRequest{key: "k-rep", customer: "cus_A", amount: 4500})
	evSend(t, e, evRequest{key: "k-rep", customer: "cus_A", amount: 4500, agent: "tekrar-pos/3.1"})
	evSend(t, e, evRequest{key: evilKey, customer: "cus_B", amount: 1200, agent: evilAgent})
	if r := evSend(t, e, evRequest{key: evilKey, customer: "cus_B", amount: 1200, agent: evilAgent}); r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("not a replay: %d %s", r.Status, r.Body)
	}
	evSend(t, e, evRequest{key: "k-once", customer: "cus_A", amount: 900})
	e.Clock.Advance(3 * time.Hour)
	evSend(t, e, evRequest{secret: otherSecret, key: "k-kiosk", customer: "cus_K", amount: 700})
	evSend(t, e, evRequest{secret: otherSecret, key: "k-kiosk", customer: "cus_K", amount: 700})
	e.App.Service.FlushHistory()

	all := evGet(t, b, "/admin/replays", http.StatusOK)
	keys := evKeys(all, "#rows")
	if len(keys) != 4 || evCount(keys, "k-rep") != 2 || evCount(keys, evilKey) != 1 || keys[0] != "k-kiosk" {
		t.Fatalf("replays %q", keys)
	}
	if all.doc.Find(`header nav a[aria-current="page"]`).Text() != "Replays" {
		t.Error("the nav does not mark Replays")
	}
	if all.doc.Find("#rows .empty").Length() != 0 || all.doc.Find(`#rows a:contains("Next page")`).Length() != 0 {
		t.Error("an empty state or a next page beside four rows")
	}
	evNoMarkup(t, all, evilKey, evilAgent)

	// A row: time, client, key linking to its page, request id, address, device, answer.
	row := all.doc.Find("#rows tbody tr").First()
	cells := row.Find("td").Map(func(_ int, s *goquery.Selection) string { return strings.TrimSpace(s.Text()) })
	if len(cells) != 7 || cells[1] != fmt.Sprintf("kiosk (%d)", otherID) || cells[2] != "k-kiosk" ||
		cells[3] == "" || cells[4] != "127.0.0.1" || cells[5] != "tekrar-pos/3.0" || cells[6] != "201" {
		t.Errorf("kiosk row %q", cells)
	}
	if dt, _ := row.Find("td time").Attr("datetime"); !strings.HasSuffix(dt, "Z") {
		t.Errorf("time %q is not RFC 3339 UTC", dt)
	}
	href, _ := row.Find(`a[href^="/admin/keys/"]`).Attr("href")
	if href != fmt.Sprintf("/admin/keys/%d/k-kiosk", otherID) {
		t.Errorf("key link %q", href)
	}
	evGet(t, b, href, http.StatusOK)

	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"key=k-rep", []string{"k-rep", "k-rep"}},
		{"key=k-once", nil},
		{"client=" + strconv.FormatInt(otherID, 10), []string{"k-kiosk"}},
		{"customer=cus_B", []string{evilKey}},
		{"order=" + repOrder, []string{"k-rep", "k-rep"}},
		{"customer=cus_A&client=" + strconv.FormatInt(otherID, 10), nil},
		{"from=" + url.QueryEscape(evMinute(start.Add(2*time.Hour))), []string{"k-kiosk"}},
		{"to=" + url.QueryEscape(evMinute(start.Add(2*time.Hour))) + "&customer=cus_A", []string{"k-rep", "k-rep"}},
	} {
		p := evGet(t, b, "/admin/replays?"+tt.query, http.StatusOK)
		got := evKeys(p, "#rows")
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: replays %q, want %q", tt.query, got, tt.want)
		}
		if empty := p.doc.Find("#rows p.empty").Text(); (len(tt.want) == 0) != (empty == "No replays match.") {
			t.Errorf("%s: empty state %q beside %d rows", tt.query, empty, len(got))
		}
		// The form shows what was searched for.
		if v, _ := p.doc.Find(`form.filters input[name=key]`).Attr("value"); v != mustQuery(t, tt.query).Get("key") {
			t.Errorf("%s: key field %q", tt.query, v)
		}
	}
	for _, bad := range []string{"order=abc", "client=x", "from=yesterday", "after=nonsense"} {
		if p := evGet(t, b, "/admin/replays?"+bad, http.StatusBadRequest); p.doc.Find(`.error[role=alert]`).Length() != 1 {
			t.Errorf("%s: no error shown", bad)
		}
	}

	// Pages of 50, newest first, with a next link that keeps the filter.
	for i := range 55 {
		if _, err := e.DB.Exec(`
			INSERT INTO key_events (at, client_id, key, kind, status, request_id, remote_addr, user_agent)
			VALUES ($1, $2, 'k-bulk', 'replayed', 201, $3, '198.51.100.4', 'bulk/1')`,
			start.Add(-time.Hour+time.Duration(i)*time.Second), e.ClientID, fmt.Sprint("req-bulk-", i)); err != nil {
			t.Fatal(err)
		}
	}
	p1 := evGet(t, b, "/admin/replays?key=k-bulk", http.StatusOK)
	next := p1.doc.Find(`#rows a:contains("Next page")`)
	nextHref, _ := next.Attr("href")
	if n := p1.doc.Find("#rows tbody tr").Length(); n != 50 || nextHref == "" {
		t.Fatalf("first page: %d rows, next %q", n, nextHref)
	}
	if q := mustQuery(t, strings.TrimPrefix(nextHref, "/admin/replays?")); !strings.HasPrefix(nextHref, "/admin/replays?") ||
		q.Get("key") != "k-bulk" || q.Get("after") == "" {
		t.Errorf("next link %q", nextHref)
	}
	if hx, _ := next.Attr("hx-get"); hx != nextHref || next.AttrOr("hx-target", "") != "#rows" || next.AttrOr("hx-select", "") != "#rows" {
		t.Errorf("next link is not an htmx swap of #rows: %s", hx)
	}
	if got := p1.doc.Find("#rows tbody tr td code").First().Text(); got != "k-bulk" {
		t.Errorf("first row %q", got)
	}
	p2 := evGet(t, b, nextHref, http.StatusOK)
	reqs := p2.doc.Find("#rows tbody tr").Map(func(_ int, s *goquery.Selection) string { return s.Find("td").Eq(3).Text() })
	if strings.Join(reqs, ",") != "req-bulk-4,req-bulk-3,req-bulk-2,req-bulk-1,req-bulk-0" {
		t.Errorf("second page %q", reqs)
	}
	if p2.doc.Find(`#rows a:contains("Next page")`).Length() != 0 {
		t.Error("a next link on the last page")
	}
}

func mustQuery(t *testing.T, q string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestConflictsPage(t *testing.T) {
	e, b := evSignIn(t, func(c *config.Server) { c.SandboxSlowDelay = 1500 * time.Millisecond })

	// k-c: paid, then sent with another amount (a conflict), then its key used for a
	// refund (a conflict on another path). k-fine is only replayed.
	orderID := evOrderID(t, evSend(t, e, evRequest{key: "k-c", customer: "cus_C", amount: 4500}))
	if r := evSend(t, e, evRequest{key: "k-c", customer: "cus_C", amount: 4600, agent: evilAgent}); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("conflict: %d %s", r.Status, r.Body)
	}
	refund := e.Do(t, "POST", "/v1/orders/"+orderID+"/refunds", e.Secret,
		[]byte(`{"amount":100,"reason":"customer asked"}`), "Idempotency-Key", "k-c")
	if refund.Status != http.StatusUnprocessableEntity {
		t.Fatalf("refund with the order's key: %d %s", refund.Status, refund.Body)
	}
	evSend(t, e, evRequest{key: "k-fine", amount: 300})
	evSend(t, e, evRequest{key: "k-fine", amount: 300})

	// k-slow: a repeat while the first is still with the (slow) provider.
	done := make(chan apptest.Response, 1)
	go func() {
		r, _ := e.Send("POST", "/v1/orders", e.Secret, []byte(`{"currency":"TRY","items":[{"sku":"TEA","name":"Tea","quantity":1,"unit_amount":500}],
			"amount":500,"payment":{"card_token":"tok_slow"},"customer":{"id":"cus_S"}}`), "Idempotency-Key", "k-slow")
		done <- r
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := e.DB.Get(&n, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-slow'`); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow request never claimed its key")
		}
	}
	if r := evSend(t, e, evRequest{key: "k-slow", customer: "cus_S", amount: 500, card: "tok_slow"}); r.Status != http.StatusConflict {
		t.Fatalf("in-flight repeat: %d %s", r.Status, r.Body)
	}
	if r := <-done; r.Status != http.StatusCreated {
		t.Fatalf("slow first request: %d %s", r.Status, r.Body)
	}
	e.App.Service.FlushHistory()

	kinds := func(p page) []string {
		return p.doc.Find("#rows tbody tr .event").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
	}
	for _, tt := range []struct {
		query       string
		keys, kinds string
	}{
		{"", "k-c,k-c", "reused_conflict,reused_conflict"},
		{"kind=conflicts", "k-c,k-c", "reused_conflict,reused_conflict"},
		{"kind=in-flight", "k-slow", "in_use_rejected"},
		{"kind=both", "k-slow,k-c,k-c", "in_use_rejected,reused_conflict,reused_conflict"},
		{"kind=both&customer=cus_S", "k-slow", "in_use_rejected"},
		{"kind=both&order=" + orderID, "k-c,k-c", "reused_conflict,reused_conflict"},
		{"key=k-fine&kind=both", "", ""},
	} {
		p := evGet(t, b, "/admin/conflicts?"+tt.query, http.StatusOK)
		if got := strings.Join(evKeys(p, "#rows"), ","); got != tt.keys {
			t.Errorf("%q: keys %q, want %q", tt.query, got, tt.keys)
		}
		if got := strings.Join(kinds(p), ","); got != tt.kinds {
			t.Errorf("%q: kinds %q, want %q", tt.query, got, tt.kinds)
		}
		want := mustQuery(t, tt.query).Get("kind")
		if want == "" {
			want = "conflicts"
		}
		if sel := p.doc.Find(`form.filters select[name=kind] option[selected]`).AttrOr("value", ""); sel != want {
			t.Errorf("%q: kind %q selected, want %q", tt.query, sel, want)
		}
	}
	empty := evGet(t, b, "/admin/conflicts?kind=in-flight&client=999999", http.StatusOK)
	if empty.doc.Find("#rows table").Length() != 0 || empty.doc.Find("#rows p.empty").Text() != "No in-flight rejections match." {
		t.Errorf("empty state: %s", empty.doc.Find("#rows").Text())
	}
	if p := evGet(t, b, "/admin/conflicts?kind=everything", http.StatusBadRequest); p.doc.Find(`.error[role=alert]`).Length() != 1 {
		t.Error("an unknown kind is not refused")
	}

	// What differed: the fingerprints, stored against sent, and the request line where it
	// is not the first's.
	var stored, sentAmount, sentRefund string
	for q, dst := range map[string]*string{
		`SELECT encode(fingerprint, 'hex') FROM idempotency_keys WHERE key = 'k-c'`:                                                            &stored,
		`SELECT encode(fingerprint, 'hex') FROM key_events WHERE key = 'k-c' AND kind = 'reused_conflict' AND detail->>'path' = '/v1/orders'`:  &sentAmount,
		`SELECT encode(fingerprint, 'hex') FROM key_events WHERE key = 'k-c' AND kind = 'reused_conflict' AND detail->>'path' <> '/v1/orders'`: &sentRefund,
	} {
		if err := e.DB.Get(dst, q); err != nil {
			t.Fatal(err)
		}
	}
	p := evGet(t, b, "/admin/conflicts", http.StatusOK)
	rows := p.doc.Find("#rows tbody tr")
	refundRow, amountRow := rows.Eq(0), rows.Eq(1) // newest first
	for _, r := range []struct {
		row  *goquery.Selection
		sent string
	}{{refundRow, sentRefund}, {amountRow, sentAmount}} {
		fps := r.row.Find("td code[title]").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
		if len(fps) != 2 || fps[0] != stored[:12] || fps[1] != r.sent[:12] || fps[0] == fps[1] {
			t.Errorf("fingerprints %q, want stored %s sent %s", fps, stored[:12], r.sent[:12])
		}
	}
	if diff := refundRow.Text(); !strings.Contains(diff, "POST /v1/orders,") ||
		!strings.Contains(diff, "POST /v1/orders/"+orderID+"/refunds") {
		t.Errorf("the refund conflict does not show the two paths: %s", diff)
	}
	if got := amountRow.Find("ul.differs li").Map(func(_ int, s *goquery.Selection) string { return s.Text() }); strings.Join(got, "; ") != "amount: 45.00 TRY → 46.00 TRY; items" {
		t.Errorf("the amount conflict lists %q as what differed", got)
	}
	if got := refundRow.Find("ul.differs li").Text(); got != "route: POST /v1/orders → POST /v1/orders/"+orderID+"/refunds" {
		t.Errorf("the refund conflict lists %q as what differed", got)
	}
	if strings.Contains(amountRow.Text(), "request stored") {
		t.Errorf("the same request line shown as a difference: %s", amountRow.Text())
	}
	if st := amountRow.Find("td").Eq(7).Text(); st != "422" {
		t.Errorf("answer %q", st)
	}
	evNoMarkup(t, p, evilAgent)
	inflight := evGet(t, b, "/admin/conflicts?kind=in-flight", http.StatusOK)
	if !strings.Contains(inflight.doc.Find("#rows tbody tr").Text(), "still running") ||
		inflight.doc.Find("#rows tbody tr td").Eq(7).Text() != "409" {
		t.Errorf("in-flight row: %s", inflight.doc.Find("#rows tbody tr").Text())
	}
}

func TestExpirationsPage(t *testing.T) {
	e, b := evSignIn(t)

	// Nothing yet: three empty states.
	p := evGet(t, b, "/admin/expirations", http.StatusOK)
	for sel, want := range map[string]string{
		"#expiring p.empty": "No keys expire in the next hour.",
		"#no-sweeps":        "No sweeps recorded yet.",
		"#late p.empty":     "No late retries.",
	} {
		if got := p.doc.Find(sel).Text(); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	if p.doc.Find(`header nav a[aria-current="page"]`).Text() != "Expirations" {
		t.Error("the nav does not mark Expirations")
	}

	// A client whose keys live 30 minutes: its key expires within the hour, the default
	// client's (24 hours) does not.
	shortSecret, shortID := e.NewClient(t, "short ttl")
	if _, err := e.DB.Exec(`UPDATE clients SET key_ttl = interval '30 minutes' WHERE id = $1`, shortID); err != nil {
		t.Fatal(err)
	}
	evSend(t, e, evRequest{secret: shortSecret, key: "k-soon", amount: 100})
	evSend(t, e, evRequest{secret: shortSecret, key: evilKey, amount: 100})
	sameOrder := evOrderID(t, evSend(t, e, evRequest{key: "k-late-same", amount: 200}))
	otherOrder := evOrderID(t, evSend(t, e, evRequest{key: evilLate, amount: 300}))
	p = evGet(t, b, "/admin/expirations", http.StatusOK)
	if got := strings.Join(evKeys(p, "#expiring"), ","); got != "k-soon,"+evilKey {
		t.Errorf("expiring within the hour: %q", got)
	}
	evNoMarkup(t, p, evilKey)

	// A day later: a retry of an expired key not yet swept (the same request), and after
	// two sweeps (tombstone, then delete) one of a swept key with another body.
	e.Clock.Advance(25 * time.Hour)
	if r := evSend(t, e, evRequest{key: "k-late-same", amount: 200, agent: evilAgent}); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("late retry: %d %s", r.Status, r.Body)
	}
	if _, err := e.App.Sweeper.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(5 * time.Minute)
	res, err := e.App.Sweeper.Pass(t.Context())
	if err != nil || res.KeysDeleted == 0 {
		t.Fatalf("second sweep: %+v %v", res, err)
	}
	if r := evSend(t, e, evRequest{key: evilLate, amount: 301}); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("late retry after the sweep: %d %s", r.Status, r.Body)
	}
	e.App.Service.FlushHistory()

	// The console's clock moved on too: the session of a day ago has lapsed.
	if p := b.login("viewer@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("login a day later: %d", p.status)
	}
	p = evGet(t, b, "/admin/expirations", http.StatusOK)
	if n := p.doc.Find("#expiring tbody tr").Length(); n != 0 {
		t.Errorf("%d keys expiring a day later", n)
	}
	sweeps := p.doc.Find("#sweeps tbody tr")
	if sweeps.Length() != 2 {
		t.Fatalf("%d sweeps shown", sweeps.Length())
	}
	newest := sweeps.First().Find("td").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
	oldest := sweeps.Last().Find("td").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
	if oldest[1] != "4" || newest[2] != "4" || newest[5] == "" || newest[7] != "" {
		t.Errorf("sweeps: newest %q, oldest %q", newest, oldest)
	}
	late := p.doc.Find("#late tbody tr")
	if got := strings.Join(evKeys(p, "#late"), ","); got != evilLate+",k-late-same" {
		t.Fatalf("late retries %q", got)
	}
	for i, want := range []struct {
		order string
		note  string
	}{{otherOrder, "another request, after the key was swept"}, {sameOrder, "the same request, after the key expired"}} {
		row := late.Eq(i)
		if href := row.Find("a.order").AttrOr("href", ""); href != "/admin/orders/"+want.order {
			t.Errorf("row %d: order link %q, want order %s", i, href, want.order)
		}
		if note := row.Find("td").Eq(4).Text(); note != want.note {
			t.Errorf("row %d: %q, want %q", i, note, want.note)
		}
	}
	evNoMarkup(t, p, evilLate, evilAgent)

	// Older late retries page on their own, keeping the page's other lists.
	for i := range 50 {
		if _, err := e.DB.Exec(`
			INSERT INTO key_events (at, client_id, key, kind, status, detail)
			VALUES ($1, $2, $3, 'late_retry', 422, '{"swept":true,"same_request":true}')`,
			e.Clock.Now().Add(-48*time.Hour+time.Duration(i)*time.Second), e.ClientID, fmt.Sprintf("k-old-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	p = evGet(t, b, "/admin/expirations", http.StatusOK)
	next := p.doc.Find(`#late a:contains("Next page")`)
	href := next.AttrOr("href", "")
	if p.doc.Find("#late tbody tr").Length() != 50 || mustQuery(t, strings.TrimPrefix(href, "/admin/expirations?")).Get("late_after") == "" ||
		next.AttrOr("hx-target", "") != "#late" {
		t.Fatalf("first page of late retries: %d rows, next %q", p.doc.Find("#late tbody tr").Length(), href)
	}
	p2 := evGet(t, b, href, http.StatusOK)
	if got := strings.Join(evKeys(p2, "#late"), ","); got != "k-old-01,k-old-00" {
		t.Errorf("second page of late retries %q", got)
	}
	if p2.doc.Find("#late a.order").Length() != 0 || p2.doc.Find("#sweeps tbody tr").Length() != 2 {
		t.Error("second page: an order link for a key without one, or the sweeps are gone")
	}
	if bad := evGet(t, b, "/admin/expirations?late_after=nonsense", http.StatusBadRequest); bad.doc.Find(`.error[role=alert]`).Length() != 1 {
		t.Error("a malformed cursor is not refused")
	}
}
