package api_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// The endpoint quota holds under concurrency: n creations for one client released at once
// (each request on a connection of its own) make exactly MaxEndpoints endpoints, and every
// other one is refused with 422 validation_failed naming url; another client creating
// endpoints at the same moment is not affected. Counted then inserted without a lock, 40
// made 35 endpoints and 100 made 41.
func TestWebhookEndpointQuotaUnderConcurrency(t *testing.T) {
	e := apptest.New(t, withSecretsKey, func(c *config.Server) { c.DBMaxConns = 120 })
	for _, n := range []int{40, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			busy, busyID := e.NewClient(t, fmt.Sprintf("busy app %d", n))
			quiet, quietID := e.NewClient(t, fmt.Sprintf("quiet app %d", n))
			const quietN = 5
			results := make([]apptest.Response, n+quietN)
			errs := make([]error, n+quietN)
			var ready, done sync.WaitGroup
			start := make(chan struct{})
			for i := range n + quietN {
				secret := busy
				if i >= n {
					secret = quiet
				}
				ready.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					body := fmt.Appendf(nil, `{"url":"https://93.184.215.14/hooks/%d","event_types":["order.paid"]}`, i)
					ready.Done()
					<-start
					results[i], errs[i] = e.Send("POST", "/v1/webhook-endpoints", secret, body, "Content-Type", "application/json")
				}()
			}
			ready.Wait()
			close(start)
			done.Wait()

			created, refused := 0, 0
			for i, r := range results[:n] {
				if errs[i] != nil {
					t.Fatalf("creation %d: %v", i, errs[i])
				}
				switch r.Status {
				case 201:
					created++
				case 422:
					var p struct {
						Code   string `json:"code"`
						Errors []struct {
							Field string `json:"field"`
						} `json:"errors"`
					}
					if err := json.Unmarshal(r.Body, &p); err != nil || p.Code != "validation_failed" || len(p.Errors) != 1 || p.Errors[0].Field != "url" {
						t.Errorf("creation %d refused with %s", i, r.Body)
					}
					refused++
				default:
					t.Errorf("creation %d: %d %s", i, r.Status, r.Body)
				}
			}
			for i, r := range results[n:] {
				if errs[n+i] != nil || r.Status != 201 {
					t.Errorf("the other client's creation %d: %d %s %v", i, r.Status, r.Body, errs[n+i])
				}
			}
			var rows, quietRows int
			if err := e.DB.Get(&rows, `SELECT count(*) FROM webhook_endpoints WHERE client_id = $1 AND deleted_at IS NULL`, busyID); err != nil {
				t.Fatal(err)
			}
			if err := e.DB.Get(&quietRows, `SELECT count(*) FROM webhook_endpoints WHERE client_id = $1 AND deleted_at IS NULL`, quietID); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d concurrent creations: %d created (%d rows), %d refused; the other client: %d rows", n, created, rows, refused, quietRows)
			if rows != deliveries.MaxEndpoints || created != deliveries.MaxEndpoints || refused != n-deliveries.MaxEndpoints {
				t.Errorf("%d concurrent creations: %d rows, %d answered 201, %d refused; want %d rows", n, rows, created, refused, deliveries.MaxEndpoints)
			}
			if quietRows != quietN {
				t.Errorf("the other client has %d endpoints, want %d", quietRows, quietN)
			}
		})
	}
}
