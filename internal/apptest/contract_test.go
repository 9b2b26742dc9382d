package apptest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestContractCatchesDrift feeds the contract exchanges that break the document in each way
// it promises to catch, and one that does not, so that a checker that lets everything pass
// fails here rather than silently in every API test.
func TestContractCatchesDrift(t *testing.T) {
	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	const client = `{"id":1,"name":"app","key_ttl_seconds":86400,"provider_customer_prefix":"cl_3f9a0c7e51d2b8a4c6e0f1d2_"}`
	const order = `{"currency":"TRY","items":[{"sku":"A","name":"A","quantity":1,"unit_amount":5}],"amount":5,"payment":{"card_token":"tok_visa"}}`
	const created = `{"id":"ord_0123456789abcdef0123456789abcdef","status":"paid","amount":5,"currency":"TRY",` +
		`"items":[{"sku":"A","name":"A","quantity":1,"unit_amount":5}],"metadata":{"device_id":"A1"},"refunded_amount":0,"created_at":"2026-12-02T14:00:00Z"}`
	keyed := []string{"Idempotency-Key", "k1", "Content-Type", "application/json", "Authorization", "Bearer s"}
	createdHeaders := []string{"Content-Type", "application/json", "Location", "/v1/orders/ord_0123456789abcdef0123456789abcdef",
		"Idempotent-Replayed", "false", "Idempotency-Key", "k1", "Idempotency-Expires", "2026-12-03T14:00:00Z"}
	problemHeaders := []string{"Content-Type", "application/problem+json"}
	const notFound = `{"type":"/problems/not_found","title":"Not found","status":404,"instance":"/v1/nowhere","code":"not_found"}`
	for _, tc := range []struct {
		name                  string
		method, path, reqBody string
		reqHeaders            []string
		status                int
		respHeaders           []string
		respBody              string
		want                  string // a part of the violation; "" for none
	}{
		{"conforming", "GET", "/v1/client", "", []string{"Authorization", "Bearer s"}, 200,
			[]string{"Content-Type", "application/json"}, client, ""},
		{"conforming keyed post", "POST", "/v1/orders", order, keyed, 201, createdHeaders, created, ""},
		{"undeclared response member", "GET", "/v1/client", "", []string{"Authorization", "Bearer s"}, 200,
			[]string{"Content-Type", "application/json"}, strings.Replace(client, `"id":1`, `"id":1,"secret":"x"`, 1), "does not match"},
		{"wrong member type", "GET", "/v1/client", "", []string{"Authorization", "Bearer s"}, 200,
			[]string{"Content-Type", "application/json"}, strings.Replace(client, `"id":1`, `"id":"1"`, 1), "does not match"},
		{"undeclared status", "GET", "/v1/client", "", []string{"Authorization", "Bearer s"}, 418,
			problemHeaders, notFound, "does not match"},
		{"missing required header", "POST", "/v1/orders", order, keyed, 201,
			[]string{"Content-Type", "application/json", "Idempotent-Replayed", "maybe"}, created, "does not match"},
		{"undeclared response header", "GET", "/v1/client", "", []string{"Authorization", "Bearer s"}, 200,
			[]string{"Content-Type", "application/json", "X-Secret-Debug", "1"}, client, ""}, // no headers declared: not strict
		{"undocumented route served", "GET", "/v1/registers", "", []string{"Authorization", "Bearer s"}, 200,
			[]string{"Content-Type", "application/json"}, `{}`, "no such operation"},
		{"undocumented route refused", "GET", "/v1/nowhere", "", nil, 404, problemHeaders, notFound, ""},
		{"refused request accepted", "POST", "/v1/orders", order, []string{"Content-Type", "application/json", "Authorization", "Bearer s"}, 201,
			createdHeaders, created, "refuses this request"},
		{"refused request replayed", "POST", "/v1/orders", order, []string{"Content-Type", "application/json", "Authorization", "Bearer s"}, 201,
			append(createdHeaders[:4:4], "Idempotent-Replayed", "true"), created, ""},
		{"refused request refused", "POST", "/v1/orders", `{"amount":"x"}`, keyed, 422, problemHeaders,
			`{"type":"/problems/validation_failed","title":"Validation failed","status":422,"code":"validation_failed","retryable":false,"safe_new_key":true}`, ""},
		{"outside the API", "GET", "/admin/login", "", nil, 200, []string{"Content-Type", "text/html"}, "<html>", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://tekrar.test"+tc.path, strings.NewReader(tc.reqBody))
			for i := 0; i+1 < len(tc.reqHeaders); i += 2 {
				req.Header.Set(tc.reqHeaders[i], tc.reqHeaders[i+1])
			}
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{}}
			for i := 0; i+1 < len(tc.respHeaders); i += 2 {
				resp.Header.Set(tc.respHeaders[i], tc.respHeaders[i+1])
			}
			got := strings.Join(c.check(req, []byte(tc.reqBody), resp, []byte(tc.respBody)), "\n")
			switch {
			case tc.want == "" && got != "":
				t.Errorf("violation reported for a conforming exchange:\n%s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("violation %q, want one saying %q", got, tc.want)
			}
		})
	}
}
