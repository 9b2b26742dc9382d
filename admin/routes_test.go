package admin_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/settlement"
	"github.com/tekrar/tekrar/internal/apptest"
)

// TestEveryConsoleRouteNeedsASession walks the routes the app registers, not a list kept by
// hand, so that a page or action added later cannot be left open: signed out, every console
// route but the sign-in page sends to it and changes nothing; signed in as a viewer, every
// form but signing out is refused.
func TestEveryConsoleRouteNeedsASession(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	order := pay(t, e, payment{key: "route-walk", item: "Latte", amount: 4500})
	b := newBrowser(t, e)
	var n int
	for _, r := range e.App.Routes() {
		if !strings.HasPrefix(r.Path, "/admin") || r.Path == "/admin/login" {
			continue
		}
		n++
		path := walkPath(r.Path, order)
		var form url.Values
		if r.Method == http.MethodPost {
			form = url.Values{"amount": {"45.00"}, "nonce": {"n-1"}, "reason": {"walk"}}
		}
		p := b.do(r.Method, path, form)
		loc := p.header.Get("Location")
		if p.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/admin/login?next=") {
			t.Errorf("%s %s signed out: %d %q, want 303 to the sign-in page", r.Method, path, p.status, loc)
		}
	}
	if n < 15 {
		t.Fatalf("only %d console routes registered: the walk is not seeing the console", n)
	}
	assertNoEffects(t, e, "signed-out requests")

	// Signed in as a viewer, with the session's own CSRF token, every form but signing out
	// is refused: acting is an admin's.
	newOperator(t, e, "viewer@example.com", admin.RoleViewer)
	if p := b.login("viewer@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("viewer sign-in: %d", p.status)
	}
	home := b.do("GET", "/admin", nil)
	csrf, _ := home.doc.Find(`form[action="/admin/logout"] input[name=csrf]`).Attr("value")
	for _, r := range e.App.Routes() {
		if r.Method != http.MethodPost || !strings.HasPrefix(r.Path, "/admin") || r.Path == "/admin/login" || r.Path == "/admin/logout" {
			continue
		}
		path := walkPath(r.Path, order)
		p := b.do(r.Method, path, url.Values{"csrf": {csrf}, "amount": {"45.00"}, "nonce": {"n-2"}, "reason": {"walk"}})
		if p.status != http.StatusForbidden {
			t.Errorf("viewer %s %s: %d, want 403", r.Method, path, p.status)
		}
	}
	assertNoEffects(t, e, "a viewer's requests")
}

// walkPath fills a route's parameters with the walk's order and key.
func walkPath(route, order string) string {
	return strings.NewReplacer(":client", "1", ":key", "route-walk", ":sku", "route-walk", ":id", order, "*filepath", "x").Replace(route)
}

func assertNoEffects(t *testing.T, e *apptest.Env, who string) {
	t.Helper()
	var effects int
	if err := e.DB.Get(&effects, `SELECT (SELECT count(*) FROM refunds) + (SELECT count(*) FROM audit_log)`); err != nil || effects != 0 {
		t.Fatalf("%s left %d refunds or audit entries (%v)", who, effects, err)
	}
}

// TestEveryConsoleErrorIsAConsolePage walks the routes the app registers and sends each one
// what can go wrong with it: an id that names nothing, an id that cannot be one, input that
// cannot be a value, a viewer at an admin's page, a server error and a database outage.
// Every answer is an HTML page in the console's layout, never plain text; every error page
// carries the request id the log has the details under. Before, an unknown operator was a
// plain-text 404, a page that failed to render a plain-text 500, and the outage page had the
// id only in its prose.
func TestEveryConsoleErrorIsAConsolePage(t *testing.T) {
	e := apptest.New(t)
	adm := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	viewer := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	order := actOrder(t, e, "route-walk", 4500)
	client := strconv.FormatInt(e.ClientID, 10)
	if r := e.Do(t, "PUT", "/v1/products/route-walk", e.Secret, []byte(`{"name":"Beans","price":1000,"currency":"TRY","stock":3}`)); r.Status != http.StatusCreated {
		t.Fatalf("product: %d %s", r.Status, r.Body)
	}
	var opID string
	if err := e.DB.Get(&opID, `SELECT id::text FROM operators WHERE email = 'admin@example.com'`); err != nil {
		t.Fatal(err)
	}
	csrf := func(b *browser) string {
		t.Helper()
		v, ok := b.do("GET", "/admin", nil).doc.Find(`form[action="/admin/logout"] input[name=csrf]`).Attr("value")
		if !ok {
			t.Fatal("no CSRF token on the overview")
		}
		return v
	}
	admCSRF, viewerCSRF := csrf(adm), csrf(viewer)
	// A receipt of the order, for the receipt pages' :event.
	const walkEvent = "evt_routewalk"
	if _, err := e.DB.Exec(`
		INSERT INTO receipts (event_id, order_id, client_id, kind, recipient, subject, message_id, body_text, body_html, state, created_at)
		SELECT $2, id, client_id, 'paid', 'walk@example.com', 'Receipt', '<evt_routewalk.receipt@shop.example>', 'text', '<p>html</p>', 'kept', now()
		  FROM orders WHERE public_id = $1`, order, walkEvent); err != nil {
		t.Fatal(err)
	}
	var endpointID, deliveryID string
	if err := e.DB.Get(&endpointID, `INSERT INTO webhook_endpoints (client_id, url, event_types, created_at)
		VALUES ($1, 'https://93.184.215.14/', '{order.paid}', now()) RETURNING public_id`, e.ClientID); err != nil {
		t.Fatal(err)
	}
	if err := e.DB.Get(&deliveryID, `INSERT INTO webhook_deliveries (event_id, event_type, endpoint_id, payload, created_at)
		SELECT 'evt_walk', 'order.paid', id, '{}', now() FROM webhook_endpoints WHERE public_id = $1 RETURNING id::text`, endpointID); err != nil {
		t.Fatal(err)
	}
	// A settled day of the client, for a settlement's :day.
	settledDay := calendar.Of(time.Now(), time.UTC).AddDays(-2)
	if _, err := settlement.New(e.DB, settlement.Config{Now: func() time.Time { return time.Now().Add(72 * time.Hour) }}, nil).
		Settle(context.Background(), e.ClientID, settledDay); err != nil {
		t.Fatal(err)
	}

	// fill puts ids into a route's parameters: orderID for :id of an order, opID for an
	// operator's, clientID and key for a key's, key for a product's sku; :event is the order's
	// receipt's event, or an event with no receipt when orderID is not the order (and the
	// settled day for :day, or no day). A webhook
	// route gets the walk's endpoint and delivery with the real order, and the order's and
	// operator's values otherwise (which name no endpoint or delivery).
	fill := func(route, orderID, opID, clientID, key string) string {
		id, delivery := orderID, opID
		if strings.HasPrefix(route, "/admin/operators/") {
			id = opID
		}
		event, day := "evt_nothing", "no-such-day"
		if orderID == order {
			event, day = walkEvent, settledDay.String()
		}
		if strings.HasPrefix(route, "/admin/webhooks/") && orderID == order {
			id, delivery = endpointID, deliveryID
		}
		return strings.NewReplacer(":client", clientID, ":key", key, ":sku", key, ":id", id, ":delivery", delivery, ":event", event, ":day", day).Replace(route)
	}
	type request struct {
		b            *browser
		method, path string
		form         url.Values
	}
	// send makes a request of a route; form is nil for a GET, and a POST's form carries its
	// browser's CSRF token unless form says otherwise.
	send := func(r request) page {
		t.Helper()
		if r.method == http.MethodPost {
			f := url.Values{"csrf": {admCSRF}, "amount": {"1.00"}, "reason": {"walk"}}
			if r.b == viewer {
				f.Set("csrf", viewerCSRF)
			}
			for k, v := range r.form {
				f[k] = v
			}
			r.form = f
		}
		return r.b.do(r.method, r.path, r.form)
	}

	var routes []gin.RouteInfo
	for _, r := range e.App.Routes() {
		if r.Path != "/admin" && !strings.HasPrefix(r.Path, "/admin/") {
			continue
		}
		routes = append(routes, r)
		// Mounted through the wrapper, a handler's error can only be answered one way.
		if !strings.Contains(r.Handler, "(*console).handle") {
			t.Errorf("%s %s is served by %s, not through the console's error wrapper", r.Method, r.Path, r.Handler)
		}
	}
	if len(routes) < 20 {
		t.Fatalf("only %d console routes: the walk is not seeing the console", len(routes))
	}
	skip := func(r gin.RouteInfo) bool { return r.Path == "/admin/logout" } // it would end the session

	// An id that names nothing, and an id that cannot be one: the page of nothing is a 404.
	for _, r := range routes {
		if !strings.Contains(r.Path, ":") {
			continue
		}
		for _, path := range []string{
			fill(r.Path, "ord_00000000000000000000000000000000", "999999999", client, "no-such-key"),
			fill(r.Path, "abc", "abc", "x", "no-such-key"),
		} {
			p := send(request{adm, r.Method, path, url.Values{"nonce": {"n-unknown"}}})
			assertErrorPage(t, r.Method+" "+path, p, http.StatusNotFound)
		}
	}
	// A console path that is no page, asked for by a browser (anything else is answered
	// problem JSON: see internal/app).
	req, _ := http.NewRequest("GET", e.URL+"/admin/no-such-page", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	resp, err := adm.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := goquery.NewDocumentFromReader(resp.Body)
	resp.Body.Close()
	assertErrorPage(t, "GET /admin/no-such-page", page{status: resp.StatusCode, header: resp.Header, doc: doc}, http.StatusNotFound)

	// Input that cannot be a value: a search form keeps its form and says what is wrong
	// beside it; anything else is the error page.
	bad := "?client=x&after=%21%21&expiring_after=%21%21&late_after=%21%21&kind=x&first=x&second=y&window=x&from=x&target=x"
	for _, r := range routes {
		if skip(r) {
			continue
		}
		path := fill(r.Path, order, opID, client, "route-walk")
		form := url.Values{"nonce": {""}, "amount": {"lots"}}
		if r.Method == http.MethodGet {
			path, form = path+bad, nil
		}
		if r.Path == "/admin/login" {
			form = url.Values{"csrf": {"not-the-cookie"}}
		}
		p := send(request{adm, r.Method, path, form})
		if p.status < 400 {
			continue // what it cannot read it leaves out (the overview's window), or it is not read at all
		}
		if p.doc.Find(".error-page").Length() > 0 {
			assertErrorPage(t, r.Method+" "+path, p, p.status)
			continue
		}
		assertConsolePage(t, r.Method+" "+path, p)
		if p.status != http.StatusBadRequest && p.status != http.StatusUnprocessableEntity {
			t.Errorf("%s %s: %d with a page that is not the error page", r.Method, path, p.status)
		}
		if strings.TrimSpace(p.doc.Find(`[role=alert]`).Text()) == "" {
			t.Errorf("%s %s: %d, and the page does not say what is wrong", r.Method, path, p.status)
		}
	}

	// A viewer at an admin's page or form: 403, the error page.
	var refused int
	for _, r := range routes {
		if skip(r) || r.Path == "/admin/login" {
			continue
		}
		path := fill(r.Path, order, opID, client, "route-walk")
		if r.Path == "/admin/orders/pair" {
			path += "?first=" + order + "&second=" + order
		}
		p := send(request{viewer, r.Method, path, url.Values{"nonce": {"n-viewer"}}})
		adminOnly := r.Method == http.MethodPost || strings.HasPrefix(r.Path, "/admin/operators") ||
			strings.HasSuffix(r.Path, "/refund") || strings.HasSuffix(r.Path, "/release") || strings.HasSuffix(r.Path, "/expire") ||
			strings.HasSuffix(r.Path, "/redeliver") || strings.HasSuffix(r.Path, "/replay") || strings.HasSuffix(r.Path, "/resend")
		switch {
		case adminOnly:
			refused++
			assertErrorPage(t, "viewer "+r.Method+" "+path, p, http.StatusForbidden)
		case p.status >= 400:
			t.Errorf("viewer %s %s: %d", r.Method, path, p.status)
		}
	}
	if refused < 9 {
		t.Errorf("%d admin routes refused to a viewer, want at least 9", refused)
	}
	assertNoEffects(t, e, "the walk's refused requests")

	// A server error: the details go to the log, the page says 500 with the request id.
	if _, err := e.DB.Exec(`ALTER TABLE audit_log RENAME TO audit_log_gone`); err != nil {
		t.Fatal(err)
	}
	assertErrorPage(t, "GET /admin/audit without its table", adm.do("GET", "/admin/audit", nil), http.StatusInternalServerError)
	if _, err := e.DB.Exec(`ALTER TABLE audit_log_gone RENAME TO audit_log`); err != nil {
		t.Fatal(err)
	}

	// The database down: every route, the sign-in page included, is the 503 page.
	up := storeDown(t, e)
	defer up()
	for _, r := range routes {
		path := fill(r.Path, order, opID, client, "route-walk")
		p := send(request{adm, r.Method, path, url.Values{"nonce": {"n-down"}}})
		if r.Method == http.MethodPost && r.Path == "/admin/login" {
			// The browser has no sign-in form's cookie: refused before the database.
			assertErrorPage(t, "store down: "+r.Method+" "+path, p, http.StatusForbidden)
			continue
		}
		assertErrorPage(t, "store down: "+r.Method+" "+path, p, http.StatusServiceUnavailable)
		if p.header.Get("Retry-After") == "" {
			t.Errorf("store down: %s %s: no Retry-After", r.Method, path)
		}
	}
}

// assertConsolePage checks that p is an HTML page in the console's layout.
func assertConsolePage(t *testing.T, what string, p page) {
	t.Helper()
	if ct := p.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("%s: Content-Type %q, not a console page: %.200s", what, ct, p.body)
		return
	}
	if p.doc.Find(`link[rel=stylesheet][href="/static/css/tekrar.css"]`).Length() != 1 || p.doc.Find("header.top").Length() != 1 {
		t.Errorf("%s: not in the console's layout: %.300s", what, p.body)
	}
}

// assertErrorPage checks that p is the console's error page, of status, with the request id.
func assertErrorPage(t *testing.T, what string, p page, status int) {
	t.Helper()
	if p.status != status {
		t.Errorf("%s: %d, want %d: %.300s", what, p.status, status, p.body)
	}
	assertConsolePage(t, what, p)
	if !strings.Contains(p.doc.Find(".error-page h1").Text(), strconv.Itoa(status)) {
		t.Errorf("%s: the error page does not say %d: %.300s", what, status, p.body)
	}
	rid := p.header.Get("X-Request-Id")
	if got := p.doc.Find(".error-page code.request-id").Text(); rid == "" || got != rid {
		t.Errorf("%s: request id on the page %q, in the header %q", what, got, rid)
	}
}

// TestOnlyTheWrapperWritesErrors reads the console's source: a handler returns its error,
// and only the wrapper (errors.go) writes an error page. No handler may render the error
// page, answer in plain text or abort with a bare status; a response body is written by
// render (the pages) and the wrapper alone. sameOrigin and formsOnly, which refuse a
// request before any page is involved, answer problem JSON as the API does (documented in
// docs/console.md, Security). streamCSV writes the CSV exports, as render writes the pages.
func TestOnlyTheWrapperWritesErrors(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	// Calls that write a response: by name, with arguments (c.Abort() writes nothing,
	// err.Error() and loc.String() are no answers).
	writers := map[string]bool{"errorPage": true, "ErrorPage": true, "String": true, "Data": true, "HTML": true,
		"JSON": true, "AbortWithStatus": true, "AbortWithError": true, "AbortWithStatusJSON": true,
		"Write": true, "WriteString": true, "WriteHeader": true}
	// streamCSV is to the CSV downloads what render is to the pages:
	// it returns an error before the first bytes to the wrapper like any handler, and cuts
	// the connection on one after them.
	allowed := map[string]bool{"errors.go": true, "admin.go.render": true, "admin.go.sameOrigin": true, "admin.go.formsOnly": true,
		"csv.go.streamCSV": true}
	fset := token.NewFileSet()
	var checked int
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || allowed[name] || allowed[name+"."+fn.Name.Name] {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, _ := sel.X.(*ast.Ident)
				writes := writers[sel.Sel.Name] && len(call.Args) > 0
				if pkg != nil && (pkg.Name == "http" && sel.Sel.Name == "Error" || pkg.Name == "server" && sel.Sel.Name == "Abort") {
					writes = true
				}
				if writes {
					t.Errorf("%s: %s calls %s: a handler returns its error to the wrapper (errors.go) instead",
						fset.Position(call.Pos()), fn.Name.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
	if checked < 10 {
		t.Fatalf("read %d files: not the console's source", checked)
	}
}
