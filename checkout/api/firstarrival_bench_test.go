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
//
// It also reports the WAL Postgres wrote per first arrival (WAL-B/op): unlike the time, it
// does not drift with the machine's load, so two builds compare on it even on a busy host.
func BenchmarkFirstArrival(b *testing.B) {
	e := apptest.New(b)
	body := orderBody(4500, "tok_visa")
	var start string
	if err := e.DB.Get(&start, `SELECT pg_current_wal_lsn()::text`); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := e.Send("POST", "/v1/orders", e.Secret, body, "Idempotency-Key", "bench-first-"+strconv.Itoa(i))
		if err != nil || r.Status != http.StatusCreated {
			b.Fatalf("first arrival: %v %d %s", err, r.Status, r.Body)
		}
	}
	b.StopTimer()
	var wal float64
	if err := e.DB.Get(&wal, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)`, start); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(wal/float64(b.N), "WAL-B/op")
}
