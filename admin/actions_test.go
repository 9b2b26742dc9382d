package admin_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/completer"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// actSignIn creates an operator with role and returns a browser signed in as them.
func actSignIn(t *testing.T, e *apptest.Env, email, role string) *browser {
	t.Helper()
	newOperator(t, e, email, role)
	b := newBrowser(t, e)
	if p := b.login(email, password); p.status != http.StatusSeeOther {
		t.Fatalf("sign in as %s: %d", email, p.status)
	}
	return b
}

// actForm is what posting the page's form would send: its hidden and text inputs, with
// changes applied ("" deletes a field).
func actForm(t *testing.T, p page, action string, changes ...string) url.Values {
	t.Helper()
	f := p.doc.Find(`form[action="` + action + `"]`)
	if f.Length() != 1 {
		t.Fatalf("no form posting to %s (status %d): %s", action, p.status, p.body)
	}
	v := url.Values{}
	f.Find("input[name]").Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		val, _ := s.Attr("value")
		v.Set(name, val)
	})
	for i := 0; i+1 < len(changes); i += 2 {
		if changes[i+1] == "" {
			v.Del(changes[i])
		} else {
			v.Set(changes[i], changes[i+1])
		}
	}
	return v
}

// actInt runs a query answering one number.
func actInt(t *testing.T, e *apptest.Env, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := e.DB.Get(&n, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// actOrder pays amount through the API under key and returns the order's id.
// actOrder pays and returns the order's public id.
func actOrder(t *testing.T, e *apptest.Env, key string, amount int64) string {
	t.Helper()
	order(t, e, key, "Latte", amount)
	var id string
	if err := e.DB.Get(&id, `SELECT o.public_id FROM idempotency_keys k JOIN orders o ON o.id = k.order_id
		 WHERE k.client_id = $1 AND k.key = $2`, e.ClientID, key); err != nil {
		t.Fatal(err)
	}
	return id
}

func keyPath(e *apptest.Env, key string) string {
	return "/admin/keys/" + strconv.FormatInt(e.ClientID, 10) + "/" + url.PathEscape(key)
}

// ledger is what the books say of an order: tekrar's refunds, the order's refunded amount,
// the provider's refunds, and the audit log.
type ledger struct{ refunds, refunded, providerRefunds, providerRefunded, audit int64 }

func ledgerOf(t *testing.T, e *apptest.Env, orderID string) ledger {
	t.Helper()
	return ledger{
		refunds: actInt(t, e, `SELECT count(*) FROM refunds r JOIN orders o ON o.id = r.order_id
			 WHERE o.public_id = $1 AND r.status = 'succeeded'`, orderID),
		refunded:         actInt(t, e, `SELECT refunded_amount FROM orders WHERE public_id = $1`, orderID),
		providerRefunds:  actInt(t, e, `SELECT count(*) FROM psp_refunds`),
		providerRefunded: actInt(t, e, `SELECT coalesce(sum(amount), 0) FROM psp_refunds`),
		audit:            actInt(t, e, `SELECT count(*) FROM audit_log`),
	}
}

func TestAdminRefundsAnOrder(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	id := actOrder(t, e, "k-refund-me", 9000)
	orderPage := "/admin/orders/" + id
	refundPage := orderPage + "/refund"

	op := b.do("GET", orderPage, nil)
	if op.status != 200 || op.doc.Find(`#order-actions a[href="`+refundPage+`"]`).Length() != 1 {
		t.Fatalf("order page: %d, no refund button", op.status)
	}
	confirm := b.do("GET", refundPage, nil)
	if confirm.status != 200 {
		t.Fatalf("refund page: %d", confirm.status)
	}
	if v, _ := confirm.doc.Find(`input[name=amount]`).Attr("value"); v != "90.00" {
		t.Fatalf("default amount %q, want the full 90.00", v)
	}

	// A partial refund.
	partial := actForm(t, confirm, refundPage, "amount", "25.00", "reason", "cold coffee")
	p := b.do("POST", refundPage, partial)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != orderPage+"?done=refunded" {
		t.Fatalf("refund: %d %s %s", p.status, p.header.Get("Location"), p.body)
	}
	want := ledger{refunds: 1, refunded: 2500, providerRefunds: 1, providerRefunded: 2500, audit: 1}
	if got := ledgerOf(t, e, id); got != want {
		t.Fatalf("after the partial refund: %+v, want %+v", got, want)
	}
	if r := actInt(t, e, `SELECT count(*) FROM refunds r JOIN orders o ON o.id = r.order_id
		 WHERE o.public_id = $1 AND r.amount = 2500 AND r.reason = 'cold coffee' AND r.client_id = $2`, id, e.ClientID); r != 1 {
		t.Fatal("the refund is not the one asked for, or not the order's client's")
	}
	done := b.do("GET", p.header.Get("Location"), nil)
	if done.doc.Find("#order-actions .flash.ok").Length() != 1 {
		t.Fatalf("no result on the order page: %s", done.doc.Find("#order-actions").Text())
	}

	// The same form again (a double click, a resend) refunds nothing more and records nothing more.
	p = b.do("POST", refundPage, partial)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != orderPage+"?done=refund-replayed" {
		t.Fatalf("the same form again: %d %s", p.status, p.header.Get("Location"))
	}
	if got := ledgerOf(t, e, id); got != want {
		t.Fatalf("after the same form again: %+v, want %+v", got, want)
	}

	// More than is left: the clear error, and nothing changes.
	confirm = b.do("GET", refundPage, nil)
	if v, _ := confirm.doc.Find(`input[name=amount]`).Attr("value"); v != "65.00" {
		t.Fatalf("default amount %q, want what is left, 65.00", v)
	}
	p = b.do("POST", refundPage, actForm(t, confirm, refundPage, "amount", "70.00"))
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.doc.Find(".error").Text(), "refund_exceeds_captured") {
		t.Fatalf("over-refund: %d %s", p.status, p.doc.Find(".error").Text())
	}
	if got := ledgerOf(t, e, id); got != want {
		t.Fatalf("after the over-refund: %+v, want %+v", got, want)
	}

	// The rest, from the page the error left: a full refund.
	p = b.do("POST", refundPage, actForm(t, p, refundPage, "amount", "65.00"))
	if p.status != http.StatusSeeOther {
		t.Fatalf("refund of the rest: %d %s", p.status, p.doc.Find(".error").Text())
	}
	want = ledger{refunds: 2, refunded: 9000, providerRefunds: 2, providerRefunded: 9000, audit: 2}
	if got := ledgerOf(t, e, id); got != want {
		t.Fatalf("after the full refund: %+v, want %+v", got, want)
	}
	if n := actInt(t, e, `SELECT count(*) FROM idempotency_keys WHERE client_id = $1 AND key LIKE 'console-refund-%' AND state = 'completed'`, e.ClientID); n != 2 {
		t.Fatalf("%d completed console refund keys", n)
	}
	if p := b.do("GET", refundPage, nil); p.doc.Find("form[action=\""+refundPage+"\"]").Length() != 0 ||
		!strings.Contains(p.doc.Find(".error").Text(), "refunded in full") {
		t.Fatalf("refund page of a refunded order: %s", p.body)
	}

	// The audit log shows both, with who did them.
	audit := b.do("GET", "/admin/audit", nil)
	rows := audit.doc.Find("table.audit tbody tr")
	if audit.status != 200 || rows.Length() != 2 {
		t.Fatalf("audit page: %d, %d rows", audit.status, rows.Length())
	}
	rows.Each(func(_ int, r *goquery.Selection) {
		href, _ := r.Find(`a[href]`).Attr("href")
		if !strings.Contains(r.Text(), "admin@example.com") || !strings.Contains(r.Text(), admin.ActionRefund) || href != orderPage {
			t.Errorf("audit row %q (target %s)", r.Text(), href)
		}
	})
	if f := b.do("GET", "/admin/audit?target=order:"+actOrder(t, e, "k-another", 100), nil); f.doc.Find("table.audit tbody tr").Length() != 0 {
		t.Fatal("the target filter lets other orders through")
	}
}

func TestViewerCannotAct(t *testing.T) {
	e := apptest.New(t)
	id := actOrder(t, e, "k-viewer", 9000)
	// An admin opens the forms, so that the viewer has real ones to replay.
	adm := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	refundPage := "/admin/orders/" + id + "/refund"
	expirePage := keyPath(e, "k-viewer") + "/expire"
	releasePage := keyPath(e, "k-viewer") + "/release"
	forms := map[string]url.Values{
		refundPage:  actForm(t, adm.do("GET", refundPage, nil), refundPage),
		expirePage:  actForm(t, adm.do("GET", expirePage, nil), expirePage),
		releasePage: {"nonce": {"aaaaaaaaaaaaaaaaaaaaaaaa"}},
	}

	v := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	home := v.do("GET", "/admin", nil)
	csrf, _ := home.doc.Find(`form[action="/admin/logout"] input[name=csrf]`).Attr("value")
	before := ledgerOf(t, e, id)
	for path, form := range forms {
		if p := v.do("GET", path, nil); p.status != http.StatusForbidden {
			t.Errorf("viewer GET %s: %d", path, p.status)
		}
		form.Set("csrf", csrf) // the viewer's own, valid token
		if p := v.do("POST", path, form); p.status != http.StatusForbidden {
			t.Errorf("viewer POST %s: %d", path, p.status)
		}
	}
	if got := ledgerOf(t, e, id); got != before {
		t.Fatalf("a viewer changed something: %+v, was %+v", got, before)
	}
	if n := actInt(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-viewer' AND expires_at > now()`); n != 1 {
		t.Fatal("a viewer expired the key")
	}
	for _, path := range []string{"/admin/orders/" + id, keyPath(e, "k-viewer")} {
		p := v.do("GET", path, nil)
		if p.status != 200 || p.doc.Find("a.button").Length() != 0 ||
			p.doc.Find(`a[href$="/refund"], a[href$="/release"], a[href$="/expire"]`).Length() != 0 {
			t.Errorf("viewer sees action buttons on %s (%d)", path, p.status)
		}
	}
	// The admin does see them.
	if p := adm.do("GET", keyPath(e, "k-viewer"), nil); p.doc.Find(`#key-actions a[href="`+expirePage+`"]`).Length() != 1 {
		t.Fatal("the admin sees no expire button on a completed key")
	}
}

func TestActionsNeedTheCSRFToken(t *testing.T) {
	e := apptest.New(t)
	id := actOrder(t, e, "k-csrf", 9000)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	refundPage := "/admin/orders/" + id + "/refund"
	expirePage := keyPath(e, "k-csrf") + "/expire"
	before := ledgerOf(t, e, id)
	for _, path := range []string{refundPage, expirePage, keyPath(e, "k-csrf") + "/release"} {
		page := b.do("GET", path, nil)
		var form url.Values
		if page.doc.Find(`form[action="`+path+`"]`).Length() == 1 {
			form = actForm(t, page, path)
		} else {
			form = url.Values{"nonce": {"aaaaaaaaaaaaaaaaaaaaaaaa"}}
		}
		for name, token := range map[string]string{"without a token": "", "with a wrong token": "forged-token"} {
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			f.Del("csrf")
			if token != "" {
				f.Set("csrf", token)
			}
			if p := b.do("POST", path, f); p.status != http.StatusForbidden {
				t.Errorf("POST %s %s: %d", path, name, p.status)
			}
		}
	}
	if got := ledgerOf(t, e, id); got != before {
		t.Fatalf("a forged form changed something: %+v, was %+v", got, before)
	}
	if n := actInt(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-csrf' AND expires_at > now()`); n != 1 {
		t.Fatal("a forged form expired the key")
	}
}

// switchedPSP is the provider as its own HTTP service (tekrar psp) that can be taken down:
// then it answers 502 without a problem, and tekrar cannot tell what happened.
func switchedPSP(t *testing.T) (url string, down *atomic.Bool) {
	t.Helper()
	down = new(atomic.Bool)
	h := psp.NewHandler(psp.NewSandbox(dbtest.New(t), psp.SandboxOptions{}), slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Down, it still identifies cards (a re-tokenized retry's look-up); an order is
		// claimed before its charge fails either way, since a first arrival asks only to
		// charge (docs/fingerprints.md).
		if down.Load() && r.URL.Path != "/cards/fingerprint" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, down
}

func TestReleaseAKeyThatNeedsAttention(t *testing.T) {
	pspURL, down := switchedPSP(t)
	e := apptest.New(t, func(c *config.Server) {
		c.PSPURL = pspURL
		c.ProviderTimeout = 300 * time.Millisecond
		c.AttentionAfter = time.Hour
	})
	ctx := context.Background()
	pass := func() completer.Result {
		t.Helper()
		res, err := e.App.Completer.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// As in checkout/api: the provider is down for longer than the attention horizon.
	down.Store(true)
	r := e.Do(t, "POST", "/v1/orders", e.Secret, []byte(`{"currency":"TRY","items":[{"sku":"X","name":"Latte","quantity":1,"unit_amount":9000}],
		"amount":9000,"payment":{"card_token":"tok_visa"}}`), "Idempotency-Key", "k-dark")
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("order while the provider is down: %d %s", r.Status, r.Body)
	}
	e.Clock.Advance(2 * time.Minute)
	if res := pass(); res.Retry != 1 {
		t.Fatalf("completer before the horizon: %+v", res)
	}
	e.Clock.Advance(time.Hour)
	if res := pass(); res.Attention != 1 {
		t.Fatalf("completer after the horizon: %+v", res)
	}

	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	keyPage := keyPath(e, "k-dark")
	releasePage := keyPage + "/release"
	kp := b.do("GET", keyPage, nil)
	if kp.doc.Find(`#key-actions a[href="`+releasePage+`"]`).Length() != 1 || kp.doc.Find(`#key-actions a[href$="/expire"]`).Length() != 0 {
		t.Fatalf("key page actions: %s", kp.doc.Find("#key-actions").Text())
	}

	// The provider still cannot answer: nothing changes, and the page says so.
	form := actForm(t, b.do("GET", releasePage, nil), releasePage)
	p := b.do("POST", releasePage, form)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != keyPage+"?done=release-still_unknown" {
		t.Fatalf("release while the provider is down: %d %s", p.status, p.header.Get("Location"))
	}
	if st := actInt(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-dark' AND state = 'needs_attention'`); st != 1 {
		t.Fatal("the key left needs_attention while the provider was down")
	}
	if n := actInt(t, e, `SELECT count(*) FROM audit_log`); n != 0 {
		t.Fatal("a release that changed nothing was recorded")
	}
	if f := b.do("GET", p.header.Get("Location"), nil); f.doc.Find("main .flash.error").Length() != 1 {
		t.Fatal("the key page does not say the release failed")
	}

	// The provider is back: it has no charge for the key, so the order is canceled.
	down.Store(false)
	form = actForm(t, b.do("GET", releasePage, nil), releasePage)
	p = b.do("POST", releasePage, form)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != keyPage+"?done=release-canceled" {
		t.Fatalf("release: %d %s", p.status, p.header.Get("Location"))
	}
	if n := actInt(t, e, `SELECT count(*) FROM orders WHERE status = 'canceled'`); n != 1 {
		t.Fatal("the order is not canceled")
	}
	if n := actInt(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-dark' AND state = 'completed' AND attention_reason IS NULL`); n != 1 {
		t.Fatal("the key is not settled")
	}
	r = e.Do(t, "POST", "/v1/orders", e.Secret, []byte(`{"currency":"TRY","items":[{"sku":"X","name":"Latte","quantity":1,"unit_amount":9000}],
		"amount":9000,"payment":{"card_token":"tok_visa"}}`), "Idempotency-Key", "k-dark")
	if r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "payment_abandoned") || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the app's retry after the release: %d %s", r.Status, r.Body)
	}

	// The same form again changes and records nothing more.
	p = b.do("POST", releasePage, form)
	if p.header.Get("Location") != keyPage+"?done=release-not_needed" {
		t.Fatalf("the same form again: %d %s", p.status, p.header.Get("Location"))
	}
	kp = b.do("GET", keyPage, nil)
	rows := kp.doc.Find("table.audit tbody tr")
	if rows.Length() != 1 || !strings.Contains(rows.Text(), "admin@example.com") || !strings.Contains(rows.Text(), admin.ActionReleaseKey) ||
		!strings.Contains(rows.Text(), `"outcome": "canceled"`) {
		t.Fatalf("the key page's operator actions: %q", rows.Text())
	}
}

func TestForceExpireAKey(t *testing.T) {
	e := apptest.New(t)
	ctx := context.Background()
	actOrder(t, e, "k-old", 9000)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	keyPage := keyPath(e, "k-old")
	expirePage := keyPage + "/expire"

	form := actForm(t, b.do("GET", expirePage, nil), expirePage)
	p := b.do("POST", expirePage, form)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != keyPage+"?done=expired" {
		t.Fatalf("expire: %d %s %s", p.status, p.header.Get("Location"), p.body)
	}
	if n := actInt(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-old' AND expires_at <= $1`, e.Clock.Now()); n != 1 {
		t.Fatal("the key does not expire now")
	}
	if p := b.do("POST", expirePage, form); p.header.Get("Location") != keyPage+"?done=expire-already_expired" {
		t.Fatalf("the same form again: %d %s", p.status, p.header.Get("Location"))
	}
	if n := actInt(t, e, `SELECT count(*) FROM audit_log WHERE action = $1 AND target = $2`, admin.ActionExpireKey,
		"key:"+strconv.FormatInt(e.ClientID, 10)+"/k-old"); n != 1 {
		t.Fatalf("%d audit rows", n)
	}
	if kp := b.do("GET", keyPage, nil); kp.doc.Find(`#key-actions a[href="`+expirePage+`"]`).Length() != 0 {
		t.Fatal("an expired key still offers to expire")
	}

	// The sweeper tombstones it on its next pass, and a late retry is refused.
	e.Clock.Advance(time.Second)
	if res, err := e.App.Sweeper.Pass(ctx); err != nil || res.KeysTombstoned != 1 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	r := e.Do(t, "POST", "/v1/orders", e.Secret, []byte(`{"currency":"TRY","items":[{"sku":"X","name":"Latte","quantity":1,"unit_amount":9000}],
		"amount":9000,"payment":{"card_token":"tok_visa"},"customer":{"id":"cus_<b>","email":"ayse@example.com"}}`), "Idempotency-Key", "k-old")
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "idempotency_key_expired") {
		t.Fatalf("late retry: %d %s", r.Status, r.Body)
	}
	if n := actInt(t, e, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatal("the late retry made an order")
	}

	// A key in progress is refused, and the page says why.
	r = e.Do(t, "POST", "/v1/orders", e.Secret, []byte(`{"currency":"TRY","items":[{"sku":"X","name":"Tea","quantity":1,"unit_amount":500}],
		"amount":500,"payment":{"card_token":"tok_fail"}}`), "Idempotency-Key", "k-open")
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("order with tok_fail: %d", r.Status)
	}
	openPage := keyPath(e, "k-open") + "/expire"
	if p := b.do("GET", openPage, nil); p.doc.Find("form[action=\""+openPage+"\"]").Length() != 0 || !strings.Contains(p.doc.Find(".error").Text(), "in_progress") {
		t.Fatalf("expire page of a key in progress: %s", p.doc.Find("main").Text())
	}
	csrf, _ := b.do("GET", keyPage, nil).doc.Find(`form[action="/admin/logout"] input[name=csrf]`).Attr("value")
	p = b.do("POST", openPage, url.Values{"csrf": {csrf}, "nonce": {"aaaaaaaaaaaaaaaaaaaaaaaa"}})
	if p.status != http.StatusConflict || !strings.Contains(p.doc.Find(".error").Text(), "only a completed key") {
		t.Fatalf("expire a key in progress: %d %s", p.status, p.doc.Find(".error").Text())
	}
	if n := actInt(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-open' AND expires_at > $1`, e.Clock.Now()); n != 1 {
		t.Fatal("a key in progress was expired")
	}
}

func TestAuditPages(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	opID := actInt(t, e, `SELECT id FROM operators WHERE email = 'admin@example.com'`)
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const n = report.DefaultPageLimit + 10
	for i := range n {
		err := admin.RecordAudit(context.Background(), e.DB, admin.AuditRecord{At: start.Add(time.Duration(i/2) * time.Second),
			OperatorID: opID, Action: admin.ActionExpireKey, Target: fmt.Sprintf("key:%d/k-%02d<b>", e.ClientID, i),
			Nonce: fmt.Sprintf("nonce-%02d", i), Detail: map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
	}
	first := b.do("GET", "/admin/audit", nil)
	if strings.Contains(first.body, "k-59<b>") {
		t.Fatal("a key was rendered as markup")
	}
	seen := map[string]bool{}
	collect := func(p page) []string {
		var keys []string
		p.doc.Find("table.audit tbody tr a").Each(func(_ int, s *goquery.Selection) {
			keys = append(keys, s.Text())
			if seen[s.Text()] {
				t.Errorf("%s on two pages", s.Text())
			}
			seen[s.Text()] = true
		})
		return keys
	}
	keys := collect(first)
	if len(keys) != report.DefaultPageLimit || !strings.HasPrefix(keys[0], fmt.Sprintf("k-%02d<b>", n-1)) {
		t.Fatalf("first page: %d rows, newest %v", len(keys), keys[:1])
	}
	next, ok := first.doc.Find(`#audit-rows a[hx-get]`).Attr("href")
	if !ok {
		t.Fatal("no next page")
	}
	second := b.do("GET", next, nil)
	if keys := collect(second); len(keys) != 10 || !strings.HasPrefix(keys[9], "k-00<b>") {
		t.Fatalf("second page: %v", keys)
	}
	if second.doc.Find(`#audit-rows a[hx-get]`).Length() != 0 {
		t.Fatal("a next page after the last")
	}
	if p := b.do("GET", "/admin/audit?after=nonsense", nil); p.status != http.StatusBadRequest {
		t.Fatalf("bad cursor: %d", p.status)
	}
	empty := b.do("GET", "/admin/audit?target=order:1", nil)
	if empty.doc.Find("#audit-rows .empty").Length() != 1 {
		t.Fatal("no empty state")
	}
}
