package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

// Every PUT of a whole resource runs one protocol (conditionalPut): the same cases, through
// every such door, give the same statuses, headers and problems, so that the doors cannot
// drift apart. A refused PUT changes nothing in Postgres.
func TestConditionalPutProtocol(t *testing.T) {
	e := apptest.New(t)
	doors := []struct {
		name     string
		path     string
		id       string               // the path's
		body     func(n int64) []byte // a valid body; n tells one from another
		invalid  []byte               // decodes, fails validation
		snapshot string               // the resource's rows as text, $1 the client, $2 the id
	}{
		{
			name: "products", path: "/v1/products/CP-BEANS", id: "CP-BEANS",
			body: func(n int64) []byte {
				return []byte(fmt.Sprintf(`{"name":"Beans","price":%d,"currency":"TRY","stock":%d}`, 1000*n, n))
			},
			invalid: []byte(`{"name":"","price":1000,"currency":"TRY","stock":1}`),
			snapshot: `SELECT row_to_json(p)::text || ' ' || (SELECT count(*) FROM stock_movements m WHERE m.product_id = p.id)
			             FROM products p WHERE p.client_id = $1 AND p.sku = $2`,
		},
		{
			name: "carts", path: "/v1/carts/cp-till", id: "cp-till",
			body:     cartBody,
			invalid:  []byte(`{"items":[{"sku":"BEANS","name":"Beans","quantity":0,"unit_amount":1000}]}`),
			snapshot: `SELECT row_to_json(c)::text FROM carts c WHERE c.client_id = $1 AND c.public_id = $2`,
		},
	}
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			snapshot := func() string {
				t.Helper()
				var s string
				if err := e.DB.GetContext(context.Background(), &s, d.snapshot, e.ClientID, d.id); err != nil {
					t.Fatalf("snapshot: %v", err)
				}
				return s
			}
			put := func(body []byte, headers ...string) apptest.Response {
				t.Helper()
				return e.Do(t, "PUT", d.path, e.Secret, body, headers...)
			}
			ok := func(r apptest.Response, status int, etag, location string) {
				t.Helper()
				if r.Status != status || r.Header.Get("ETag") != etag || r.Header.Get("Location") != location {
					t.Fatalf("%d ETag %q Location %q, want %d %q %q; body %s", r.Status, r.Header.Get("ETag"),
						r.Header.Get("Location"), status, etag, location, r.Body)
				}
			}
			ok(put(d.body(1)), http.StatusCreated, `"1"`, d.path)
			ok(put(d.body(2)), http.StatusOK, `"2"`, "")
			last := put(d.body(3), "If-Match", `"2"`)
			ok(last, http.StatusOK, `"3"`, "")
			before := snapshot()

			refused := []struct {
				name    string
				body    []byte
				headers []string
				status  int
				code    string
			}{
				{"stale If-Match", d.body(4), []string{"If-Match", `"2"`}, http.StatusPreconditionFailed, "precondition_failed"},
				{"If-None-Match * on an existing resource", d.body(4), []string{"If-None-Match", "*"}, http.StatusPreconditionFailed, "precondition_failed"},
				{"malformed body", []byte(`{"`), nil, http.StatusBadRequest, "malformed_json"},
				{"invalid body", d.invalid, nil, http.StatusUnprocessableEntity, "validation_failed"},
				{"invalid body with the current ETag", d.invalid, []string{"If-Match", `"3"`}, http.StatusUnprocessableEntity, "validation_failed"},
			}
			for _, tt := range refused {
				r := put(tt.body, tt.headers...)
				p := problemOf(t, r, tt.status, tt.code)
				if tt.status == http.StatusPreconditionFailed && p["etag"] != `"3"` {
					t.Fatalf("%s: problem etag %v, want the current \"3\": %s", tt.name, p["etag"], r.Body)
				}
				if r.Header.Get("ETag") != "" || r.Header.Get("Location") != "" {
					t.Fatalf("%s: a refused PUT sent ETag %q Location %q", tt.name, r.Header.Get("ETag"), r.Header.Get("Location"))
				}
				if after := snapshot(); after != before {
					t.Fatalf("%s changed the rows:\n%s\nwas\n%s", tt.name, after, before)
				}
			}
			g := e.Do(t, "GET", d.path, e.Secret, nil)
			if g.Status != http.StatusOK || g.Header.Get("ETag") != `"3"` || !bytes.Equal(g.Body, last.Body) {
				t.Fatalf("GET after the refusals: %d ETag %q %s, want the last PUT's %s", g.Status, g.Header.Get("ETag"), g.Body, last.Body)
			}
		})
	}
}
