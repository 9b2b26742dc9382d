package checkout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/sweeper"
	"github.com/tekrar/tekrar/internal/problem"
)

// expiryBoundary is where every path that decides whether a key is expired must agree
// (KeyExpired): a key is live until its expires_at, and expired from that instant on.
// Postgres keeps microseconds, so one microsecond either side is the nearest neighbour.
var expiryBoundary = []struct {
	name    string
	left    time.Duration // expires_at - now
	expired bool
}{
	{"a microsecond before expires_at", time.Microsecond, false},
	{"exactly at expires_at", 0, true},
	{"a microsecond after expires_at", -time.Microsecond, true},
}

// Key expiry was decided in four places (the replay, the execution, the key status, the
// expire action), each writing the comparison out again; the sweeper decides it in SQL.
// Every one of them must answer the same at the boundary, with and without what the
// replay learnt.
func TestKeyExpiryBoundary(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	sw := sweeper.New(e.db, sweeper.Config{Now: func() time.Time { return e.now }}, slog.New(slog.DiscardHandler))
	if !(&Key{Tombstone: true, ExpiresAt: e.now.Add(time.Hour)}).Expired(e.now) {
		t.Error("a tombstone is not expired")
	}
	for i, tt := range expiryBoundary {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("k-expiry-%d", i)
			if _, status := e.order(key, "tok_visa", 4500); status != 201 {
				t.Fatalf("order: %d", status)
			}
			// The body e.order sent, for the retries.
			in := OrderInput{Currency: "TRY", Amount: 4500, Payment: PaymentInput{CardToken: "tok_visa"},
				Items: []Item{{SKU: "LATTE", Name: "Latte", Quantity: 1, UnitAmount: 4500}}}
			body, _ := json.Marshal(in)
			req := Request{Client: e.client, Key: key, Method: "POST", Path: "/v1/orders", Body: body}
			if _, err := e.db.Exec(`UPDATE idempotency_keys SET expires_at = $3 WHERE client_id = $1 AND key = $2`,
				e.client.ID, key, e.now.Add(tt.left)); err != nil {
				t.Fatal(err)
			}

			k, err := keyed.Get(ctx, e.db, e.client.ID, key)
			if err != nil {
				t.Fatal(err)
			}
			if got := k.Expired(e.now); got != tt.expired {
				t.Errorf("Key.Expired: %v, want %v", got, tt.expired)
			}
			_, lk, replayed := e.s.Replay(ctx, req)
			if replayed == tt.expired {
				t.Errorf("Replay replayed: %v, want %v", replayed, !tt.expired)
			}
			for _, lk := range []Lookup{lk, {}} {
				res, err := e.s.CreateOrder(ctx, req, lk, in)
				var p *problem.Problem
				refused := errors.As(err, &p) && p.Code == problem.CodeIdempotencyKeyExpired
				if refused != tt.expired || (!tt.expired && (err != nil || !res.Replayed)) {
					t.Errorf("CreateOrder (replay's lookup %v): replayed %v, err %v; want expired %v",
						lk != Lookup{}, res.Replayed, err, tt.expired)
				}
			}
			v, err := e.s.KeyStatus(ctx, e.client.ID, key)
			if err != nil || v.Expired != tt.expired {
				t.Errorf("KeyStatus: expired %v (%v), want %v", v.Expired, err, tt.expired)
			}
			if _, err := sw.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			swept := e.count(`SELECT count(*) FROM key_tombstones WHERE client_id = $1 AND key = $2`, e.client.ID, key) == 1
			if swept != tt.expired {
				t.Errorf("the sweeper tombstoned it: %v, want %v", swept, tt.expired)
			}
			// Last: on a live key the action expires it.
			res, err := operatorOf(e.s).ExpireKey(ctx, e.client.ID, key, e.record(false))
			if err != nil || (res.Outcome == OutcomeAlreadyExpired) != tt.expired {
				t.Errorf("ExpireKey: %+v %v, want already expired %v", res, err, tt.expired)
			}
		})
	}
}
