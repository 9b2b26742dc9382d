package problem

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

func TestWrite(t *testing.T) {
	p := New(409, "idempotency_key_in_use", "In use").WithDetail("retry <later>").
		With("retryable", true).With("code", "overridden?").With("a_first", 1)
	w := httptest.NewRecorder()
	Write(w, httptest.NewRequest("POST", "/v1/orders?x=1", nil), p)
	if w.Code != 409 || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	want := `{"type":"/problems/idempotency_key_in_use","title":"In use","status":409,"detail":"retry <later>",` +
		`"instance":"/v1/orders","code":"idempotency_key_in_use","a_first":1,"retryable":true}`
	if got := w.Body.String(); got != want {
		t.Fatalf("body\n%s\nwant\n%s", got, want)
	}
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
}

func TestBodyIsStable(t *testing.T) {
	p := New(422, "validation_failed", "Validation failed").With("z", 1).With("b", 2).With("m", 3)
	first := string(p.Body("/x"))
	for i := 0; i < 20; i++ {
		if got := string(p.Body("/x")); got != first {
			t.Fatalf("body changed between renderings: %s vs %s", got, first)
		}
	}
}
