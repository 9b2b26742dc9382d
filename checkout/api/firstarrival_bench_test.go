package api_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

// BenchmarkFirstArrival measures a first arrival end to end over HTTP on loopback: the
// key look-up that finds nothing, the claim (key and pending order in one statement), the
// sandbox charge and the completion (key, order and payment in one statement). Every
// iteration sends a new key.
//
//	go test -run '^$' -bench FirstArrival -count 5 ./checkout/api/
func BenchmarkFirstArrival(b *testing.B) {
	e := apptest.New(b)
	body := orderBody(4500, "tok_visa")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := e.Send("POST", "/v1/orders", e.Secret, body, "Idempotency-Key", "bench-first-"+strconv.Itoa(i))
		if err != nil || r.Status != http.StatusCreated {
			b.Fatalf("first arrival: %v %d %s", err, r.Status, r.Body)
		}
	}
}
