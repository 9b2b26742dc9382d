package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
)

// createdID reads the id of every body a created resource can have as json.Unmarshal
// would: tekrar's own encodings of an order and a refund (read without decoding), and
// anything else (decoded).
func TestCreatedIDReadsAsTheDecoderDoes(t *testing.T) {
	mustJSON := func(v any) string {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	order := mustJSON(checkout.OrderView{ID: "ord_0123456789abcdef0123456789abcdef", Status: "paid", Amount: 4500,
		Currency: "TRY", CreatedAt: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)})
	refund := mustJSON(checkout.RefundView{ID: "rf_0123456789abcdef0123456789abcdef", OrderID: "ord_x"})
	for _, body := range []string{
		order,
		refund,
		`{"id":"ord_1"}`,
		`{"status":"paid","id":"ord_2"}`,        // not first: decoded
		`{ "id": "ord_3" }`,                     // spaced: decoded
		`{"id":"ord\u005f4"}`,                   // escaped: decoded
		`{"id":"a\"b"}`,                         // a quote in it: decoded
		`{"id":""}`,                             // empty
		`{"id":"ord-5"}`,                        // a character ids have not: decoded
		`{"order":{"id":"ord_6"},"id":"ord_7"}`, // nested first: the top level's
		`{"amount":1}`,                          // none
		`[]`, `null`, ``, `{"id":`,              // not an object
	} {
		var want struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(body), &want); err != nil {
			want.ID = ""
		}
		if got := createdID([]byte(body)); got != want.ID {
			t.Errorf("createdID(%s) = %q, the decoder says %q", body, got, want.ID)
		}
	}
	if got := createdID([]byte(order)); got != "ord_0123456789abcdef0123456789abcdef" {
		t.Errorf("an order's id read as %q", got)
	}
}
