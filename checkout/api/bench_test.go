package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

// BenchmarkReplay measures a replay end to end over HTTP on loopback (auth, key header,
// body, fingerprint, the key lookup, the stored response written back) beside its floor:
// the same key row read with a bare SELECT through the same pool. The ratio of the two,
// from one run, is the figure; absolute numbers drift on shared machines.
//
//	go test -run '^$' -bench Replay -benchtime 3s ./checkout/api/
func BenchmarkReplay(b *testing.B) {
	e := apptest.New(b)
	body := orderBody(4500, "tok_visa")
	if r := e.Do(b, "POST", "/v1/orders", e.Secret, body, "Idempotency-Key", "bench-replay"); r.Status != http.StatusCreated {
		b.Fatalf("first request: %d %s", r.Status, r.Body)
	}
	b.Run("tekrar", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r, err := e.Send("POST", "/v1/orders", e.Secret, body, "Idempotency-Key", "bench-replay")
				if err != nil || r.Header.Get("Idempotent-Replayed") != "true" {
					b.Errorf("replay: %v %d", err, r.Status)
					return
				}
			}
		})
	})
	b.Run("bare_select", func(b *testing.B) {
		ctx := context.Background()
		stmt, err := e.DB.PreparexContext(ctx, `SELECT * FROM idempotency_keys WHERE client_id = $1 AND key = $2`)
		if err != nil {
			b.Fatal(err)
		}
		defer stmt.Close()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				row := map[string]any{}
				if err := stmt.QueryRowxContext(ctx, e.ClientID, "bench-replay").MapScan(row); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
