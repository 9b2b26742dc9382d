package api_test

import (
	"encoding/json"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

// An order's status follows its refunds, in the database and in GET /v1/orders/{id}: a
// refunded order that still says "paid" is taken for one still to refund. A partially
// refunded order can be refunded further; a refunded one is refused as an over-refund.
func TestOrderStatusFollowsRefunds(t *testing.T) {
	e := apptest.New(t)
	id := paidOrder(t, e, "k-status", 9000)
	steps := []struct {
		name       string
		amount     int64
		wantHTTP   int
		wantStatus string
	}{
		{"a part", 2500, 201, "partially_refunded"},
		{"another part", 1500, 201, "partially_refunded"},
		{"the rest", 5000, 201, "refunded"},
		{"more than is left", 1, 422, "refunded"},
	}
	for i, s := range steps {
		r, err := refund(e, e.Secret, id, "k-status-refund-"+itoa(int64(i)), s.amount)
		if err != nil || r.Status != s.wantHTTP {
			t.Fatalf("%s: refund %d: %d %s %v", s.name, s.amount, r.Status, r.Body, err)
		}
		if n := count(t, e, `SELECT count(*) FROM orders WHERE public_id = $1 AND status = $2`, id, s.wantStatus); n != 1 {
			t.Errorf("%s: the order's status in the database is not %s", s.name, s.wantStatus)
		}
		g := e.Do(t, "GET", "/v1/orders/"+id, e.Secret, nil)
		var o struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(g.Body, &o); err != nil || o.Status != s.wantStatus {
			t.Errorf("%s: GET /v1/orders/%s status %q, want %q (%s)", s.name, id, o.Status, s.wantStatus, g.Body)
		}
	}
	if n := count(t, e, `SELECT refunded_amount FROM orders WHERE public_id = $1`, id); n != 9000 {
		t.Errorf("refunded_amount %d, want 9000", n)
	}
}

// Refunds of one order finishing at once leave the status their sum gives.
func TestConcurrentRefundsSetTheStatusOfTheirSum(t *testing.T) {
	e := apptest.New(t)
	id := paidOrder(t, e, "k-concurrent", 9000)
	done := make(chan apptest.Response, 3)
	for i := range 3 {
		go func() {
			r, _ := refund(e, e.Secret, id, "k-concurrent-refund-"+itoa(int64(i)), 3000)
			done <- r
		}()
	}
	for range 3 {
		if r := <-done; r.Status != 201 {
			t.Fatalf("refund: %d %s", r.Status, r.Body)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM orders WHERE public_id = $1 AND status = 'refunded' AND refunded_amount = 9000`, id); n != 1 {
		t.Fatal("three refunds of a third each did not leave the order refunded")
	}
}
