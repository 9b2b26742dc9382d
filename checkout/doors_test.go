package checkout

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/sweeper"
)

// doorAnswer is what a keyed request was answered, whichever door it came through: the
// status, the problem's code ("" for none) and whether it was the key's stored answer.
type doorAnswer struct {
	Status   int
	Code     string
	Replayed bool
}

// doorEvent is an entry of a key's history as the console shows it. The ids and times in
// its detail (order_id, refund_id, expired_at) are each key's own, so only their presence
// is compared.
type doorEvent struct {
	Kind        string
	Status      int
	Fingerprint bool
	Detail      string
}

// doorOrder is the body both doors send: an order paid with a card token, which
// POST /v1/orders and a register's card_token sale both take as it is.
func doorOrder(token string, amount int64) (OrderInput, []byte) {
	in := OrderInput{Currency: "TRY", Amount: amount, Payment: PaymentInput{CardToken: token},
		Items: []Item{{SKU: "LATTE", Name: "Latte", Quantity: 1, UnitAmount: amount}}}
	body, _ := json.Marshal(in)
	return in, body
}

// viaOrders sends the request as POST /v1/orders does, with what Replay learnt first.
func (e *actionEnv) viaOrders(key, token string, amount int64) doorAnswer {
	e.t.Helper()
	in, body := doorOrder(token, amount)
	req := Request{Client: e.client, Key: key, Method: http.MethodPost, Path: "/v1/orders", Body: body}
	res, lk, ok := e.s.Replay(context.Background(), req)
	var err error
	if !ok {
		res, err = e.s.CreateOrder(context.Background(), req, lk, in)
	}
	st, code := e.answered(res, err)
	return doorAnswer{Status: st, Code: code, Replayed: res.Replayed}
}

// viaRegister sends the same request as a register's sale, alone in its batch.
func (e *actionEnv) viaRegister(key, token string, amount int64) doorAnswer {
	e.t.Helper()
	in, body := doorOrder(token, amount)
	out, err := e.s.SellBatch(context.Background(), SaleBatch{Client: e.client, BatchKey: "b-" + key,
		Register: RegisterInput{ID: "till-1", Name: "Till 1"},
		Sales:    []Sale{{Key: key, SoldAt: e.now.Format(time.RFC3339Nano), Body: body, Order: in}}})
	if err != nil {
		e.t.Fatalf("batch: %v", err)
	}
	a := doorAnswer{Status: out[0].Status, Replayed: out[0].Outcome == SaleReplayed}
	if out[0].Problem != nil {
		var p struct {
			Code string `json:"code"`
		}
		if err := json.Unmarshal(out[0].Problem, &p); err != nil {
			e.t.Fatalf("problem %s: %v", out[0].Problem, err)
		}
		a.Code = p.Code
	}
	return a
}

// eventsAfter is key's history after the event with id from (0: all of it).
func (e *actionEnv) eventsAfter(key string, from int64) []doorEvent {
	e.t.Helper()
	e.s.FlushHistory()
	var rows []struct {
		Kind   string `db:"kind"`
		Status *int   `db:"status"`
		FP     bool   `db:"fp"`
		Detail []byte `db:"detail"`
	}
	if err := e.db.Select(&rows, `SELECT kind, status, fingerprint IS NOT NULL AS fp, detail FROM key_events
		WHERE client_id = $1 AND key = $2 AND id > $3 ORDER BY id`, e.client.ID, key, from); err != nil {
		e.t.Fatal(err)
	}
	out := make([]doorEvent, len(rows))
	for i, r := range rows {
		out[i] = doorEvent{Kind: r.Kind, Fingerprint: r.FP}
		if r.Status != nil {
			out[i].Status = *r.Status
		}
		if r.Detail != nil {
			var d map[string]any
			if err := json.Unmarshal(r.Detail, &d); err != nil {
				e.t.Fatal(err)
			}
			for _, v := range []string{"order_id", "refund_id", "expired_at"} {
				if _, ok := d[v]; ok {
					d[v] = "(" + v + ")"
				}
			}
			b, _ := json.Marshal(d)
			out[i].Detail = string(b)
		}
	}
	return out
}

func (e *actionEnv) lastEventID() int64 {
	e.t.Helper()
	e.s.FlushHistory()
	return e.count(`SELECT coalesce(max(id), 0) FROM key_events`)
}

// TestKeyStatesAnswerAlikeAtEveryDoor runs one table of key states through both doors that
// take an order under a key: POST /v1/orders and a register's sale (POST /v1/pos/sales).
// A sale is an order under its key (docs/pos.md), so each state must get the same answer
// and leave the same events in the key's history, whichever door the retry came through.
// The decision table was once written twice, and the register's copy had drifted: no scope
// match (a new token of the same card was a conflict), no differs in a conflict's event,
// no event for the needs-attention and in-use answers.
//
// Every row retries with a card token: a cash sale's body is no valid POST /v1/orders, and
// its key is completed by its claim, so it never meets a key in progress with its own body.
func TestKeyStatesAnswerAlikeAtEveryDoor(t *testing.T) {
	const amount = 2500
	rows := []struct {
		name  string
		setup func(e *actionEnv, key string) // leaves key in the state
		token string                         // of the retry
		amt   int64                          // of the retry
		want  doorAnswer
		kinds []string // of the events the retry leaves
	}{
		{"absent", func(*actionEnv, string) {}, psp.TokenVisa, amount,
			doorAnswer{Status: 201}, []string{KindCreated, KindCompleted}},
		{"completed, the same body", completedKey, psp.TokenVisa, amount,
			doorAnswer{Status: 201, Replayed: true}, []string{KindReplayed}},
		{"completed, another body", completedKey, psp.TokenVisa, amount + 100,
			doorAnswer{Status: 422, Code: "idempotency_key_reused"}, []string{KindReusedConflict}},
		{"completed, a new token of the same card", completedKey, "tok_visa_2", amount,
			doorAnswer{Status: 201, Replayed: true}, []string{KindReplayed}},
		{"completed, a token of another card", completedKey, "tok_mastercard", amount,
			doorAnswer{Status: 422, Code: "idempotency_key_reused"}, []string{KindReusedConflict}},
		// A key a register's card sale created keeps its scope as POST /v1/orders's does.
		{"completed by a register's sale, a new token of the same card", saleCompletedKey, "tok_visa_2", amount,
			doorAnswer{Status: 201, Replayed: true}, []string{KindReplayed}},
		{"completed by a register's sale, a token of another card", saleCompletedKey, "tok_mastercard", amount,
			doorAnswer{Status: 422, Code: "idempotency_key_reused"}, []string{KindReusedConflict}},
		{"expired", expiredKey, psp.TokenVisa, amount,
			doorAnswer{Status: 422, Code: "idempotency_key_expired"}, []string{KindLateRetry}},
		{"expired, another body", expiredKey, psp.TokenVisa, amount + 100,
			doorAnswer{Status: 422, Code: "idempotency_key_expired"}, []string{KindLateRetry}},
		{"swept", sweptKey, psp.TokenVisa, amount,
			doorAnswer{Status: 422, Code: "idempotency_key_expired"}, []string{KindLateRetry}},
		{"needs attention", func(e *actionEnv, key string) { e.openKey(key, ""); e.needsAttention(key) }, psp.TokenVisa, amount,
			doorAnswer{Status: 503, Code: "needs_attention"}, []string{KindInUseRejected}},
		{"in progress, leased", leasedKey, psp.TokenVisa, amount,
			doorAnswer{Status: 409, Code: "idempotency_key_in_use"}, []string{KindInUseRejected}},
		{"in progress, lease lapsed", func(e *actionEnv, key string) { e.openKey(key, "") }, psp.TokenVisa, amount,
			doorAnswer{Status: 201}, []string{KindResumed, KindCompleted}},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			e := newActionEnv(t)
			e.s.cfg.MaxWait = 50 * time.Millisecond // a register's card sale waits for a leased key this long
			tc.setup(e, "k-order")
			tc.setup(e, "k-sale")
			from := e.lastEventID()
			got := map[string]doorAnswer{
				"POST /v1/orders":    e.viaOrders("k-order", tc.token, tc.amt),
				"POST /v1/pos/sales": e.viaRegister("k-sale", tc.token, tc.amt),
			}
			for door, a := range got {
				if a != tc.want {
					t.Errorf("%s: %+v, want %+v", door, a, tc.want)
				}
			}
			order, sale := e.eventsAfter("k-order", from), e.eventsAfter("k-sale", from)
			if !reflect.DeepEqual(order, sale) {
				t.Errorf("events differ:\n  POST /v1/orders:    %+v\n  POST /v1/pos/sales: %+v", order, sale)
			}
			var kinds []string
			for _, ev := range order {
				kinds = append(kinds, ev.Kind)
			}
			if !reflect.DeepEqual(kinds, tc.kinds) {
				t.Errorf("events %v, want %v", kinds, tc.kinds)
			}
			if tc.want.Code == "idempotency_key_reused" && (len(order) == 0 || order[0].Detail == "" ||
				!json.Valid([]byte(order[0].Detail)) || !hasDiffers(order[0].Detail)) {
				t.Errorf("the conflict's event names no differs: %+v", order)
			}
		})
	}
}

func hasDiffers(detail string) bool {
	var d struct {
		Differs []string `json:"differs"`
	}
	return json.Unmarshal([]byte(detail), &d) == nil && len(d.Differs) > 0
}

func completedKey(e *actionEnv, key string) {
	e.t.Helper()
	if _, status := e.order(key, psp.TokenVisa, 2500); status != http.StatusCreated {
		e.t.Fatalf("order %s: %d", key, status)
	}
}

// saleCompletedKey leaves key completed by a register's card sale (POST /v1/pos/sales).
func saleCompletedKey(e *actionEnv, key string) {
	e.t.Helper()
	if a := e.viaRegister(key, psp.TokenVisa, 2500); a.Status != http.StatusCreated {
		e.t.Fatalf("sale %s: %+v", key, a)
	}
}

// expiredKey leaves key completed and past its expires_at, not swept yet.
func expiredKey(e *actionEnv, key string) {
	e.t.Helper()
	completedKey(e, key)
	e.advance(e.client.KeyTTL + time.Second)
}

// sweptKey leaves only key's tombstone, as the sweeper does.
func sweptKey(e *actionEnv, key string) {
	e.t.Helper()
	expiredKey(e, key)
	sw := sweeper.New(e.db, sweeper.Config{Settle: time.Nanosecond, Now: func() time.Time { return e.now }},
		slog.New(slog.DiscardHandler))
	for range 2 { // the first pass tombstones the key, the second deletes its row
		if _, err := sw.Pass(context.Background()); err != nil {
			e.t.Fatal(err)
		}
		e.advance(time.Millisecond)
	}
	if n := e.count(`SELECT count(*) FROM idempotency_keys WHERE client_id = $1 AND key = $2`, e.client.ID, key); n != 0 {
		e.t.Fatalf("key %s not swept", key)
	}
}

// leasedKey leaves key in progress under a live lease: another worker is on it.
func leasedKey(e *actionEnv, key string) {
	e.t.Helper()
	e.openKey(key, "")
	if _, err := e.db.Exec(`UPDATE idempotency_keys SET lease_expires_at = $3 WHERE client_id = $1 AND key = $2`,
		e.client.ID, key, e.now.Add(time.Hour)); err != nil {
		e.t.Fatal(err)
	}
}
