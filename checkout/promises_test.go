package checkout

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/psptest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// promiseEnv is actionEnv on a sandbox of the given options, sharing the service's clock,
// with its calls counted and its answers forced: sandbox → Answering → Counting → Switched.
type promiseEnv struct {
	*actionEnv
	sb       *psp.Sandbox
	forced   *psptest.Answering
	counting *psptest.Counting
}

func newPromiseEnv(t *testing.T, opts psp.SandboxOptions, overHTTP bool) *promiseEnv {
	t.Helper()
	db := dbtest.New(t)
	e := &actionEnv{t: t, db: db, now: time.Now().UTC().Truncate(time.Microsecond)}
	clock := func() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }
	opts.Now = clock
	pe := &promiseEnv{actionEnv: e, sb: psp.NewSandbox(db, opts)}
	var p psp.Provider = pe.sb
	if overHTTP {
		// As a `tekrar psp` is reached: what it promises comes from GET /capability.
		srv := httptest.NewServer(psp.NewHandler(pe.sb, nil))
		t.Cleanup(srv.Close)
		p = psp.NewClient(srv.URL, srv.Client())
	}
	pe.forced = &psptest.Answering{Provider: p}
	pe.counting = &psptest.Counting{Provider: pe.forced}
	e.p = &switchedProvider{&psptest.Switched{Provider: pe.counting}}
	e.s = NewService(db, e.p, Config{Routes: testRoutes, Now: clock}, slog.New(slog.DiscardHandler))
	t.Cleanup(e.s.Close)
	var err error
	if e.client, err = clients.Create(context.Background(), db, "shop", clients.NewSecret()); err != nil {
		t.Fatal(err)
	}
	return pe
}

// interrupt leaves key in progress with its lease given back, as a worker whose provider
// call's outcome was unknown does: with charged, the charge was made and its answer lost;
// without, the provider never had it.
func (e *promiseEnv) interrupt(key string, charged bool) *Key {
	e.t.Helper()
	if charged {
		e.p.set("lost")
		defer e.p.set("")
		if _, status := e.order(key, psp.TokenVisa, 2500); status != http.StatusServiceUnavailable {
			e.t.Fatalf("order %s with its answer lost: %d", key, status)
		}
		var k Key
		if err := e.db.Get(&k, `SELECT `+keyed.Columns+` FROM idempotency_keys WHERE client_id = $1 AND key = $2`, e.client.ID, key); err != nil {
			e.t.Fatal(err)
		}
		return &k
	}
	return e.openKey(key, "")
}

// ledger is what the sandbox holds of key's order: its charges (by the order's reference,
// which every charge of it carries) and refunds.
func (e *promiseEnv) ledger(order string) (charges, refunds int64) {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM psp_charges WHERE description = $1 AND status <> 'canceled'`, chargeDescription(order)),
		e.count(`SELECT count(*) FROM psp_refunds r JOIN psp_charges c ON c.id = r.charge_id WHERE c.description = $1`, chargeDescription(order))
}

func (e *promiseEnv) orderStatus(order string) string {
	e.t.Helper()
	return e.str(`SELECT status FROM orders WHERE public_id = $1`, order)
}

// TestRecoveryFollowsWhatTheProviderPromises drives interrupted order keys through a resume
// (the client's retry) and the completer, at a sandbox whose keys last a minute, at a
// key-less one, and at one that cannot cancel: a charge is sent again only inside the key
// window, found by reference where there are no keys, and otherwise given up on, fenced or
// with a refund owed. Provider calls are counted, and the ledger and the rows are read.
func TestRecoveryFollowsWhatTheProviderPromises(t *testing.T) {
	window := psp.SandboxOptions{KeyWindow: time.Minute}
	for _, tc := range []promiseCase{
		{"window: resumed inside re-sends once, the first charge answers", window, true, true, 30 * time.Second, false, 201, StatusPaid, 1, 1, false},
		{"window: resumed inside, nothing charged, charged once", window, false, false, 30 * time.Second, false, 201, StatusPaid, 1, 1, false},
		{"window: resumed past, the charge is found and settled", window, true, false, 2 * time.Minute, false, 201, StatusPaid, 1, 0, false},
		{"window: resumed past, a lagging look-up: the fence finds the charge", window, true, true, 2 * time.Minute, false, 201, StatusPaid, 1, 0, false},
		{"window: resumed past, nothing charged: fenced and canceled", window, false, false, 2 * time.Minute, false, 409, StatusCanceled, 0, 0, false},
		{"window: the completer past the window settles the charge", window, true, false, 2 * time.Minute, true, 201, StatusPaid, 1, 0, false},
		{"window: the completer past the window, nothing charged", window, false, false, 2 * time.Minute, true, 409, StatusCanceled, 0, 0, false},
		{"key-less: the charge made is found by reference", psp.SandboxOptions{KeyLess: true}, true, false, time.Second, false, 201, StatusPaid, 1, 0, false},
		{"key-less: never made, given up with a refund owed", psp.SandboxOptions{KeyLess: true}, false, false, time.Second, false, 409, StatusCanceled, 0, 0, true},
		{"key-less: the completer finds the charge by reference", psp.SandboxOptions{KeyLess: true}, true, false, time.Second, true, 201, StatusPaid, 1, 0, false},
		{"no cancel: the completer gives up owing a refund", psp.SandboxOptions{NoCancel: true}, false, false, time.Second, true, 409, StatusCanceled, 0, 0, true},
		{"no cancel, window: resumed past, given up owing a refund", psp.SandboxOptions{NoCancel: true, KeyWindow: time.Minute}, false, false, 2 * time.Minute, false, 409, StatusCanceled, 0, 0, true},
	} {
		for _, overHTTP := range []bool{false, true} {
			name := tc.name
			if overHTTP {
				name += " (over HTTP)"
			}
			t.Run(name, func(t *testing.T) { checkPromise(t, tc, overHTTP) })
		}
	}
}

// promiseCase is a row of TestRecoveryFollowsWhatTheProviderPromises.
type promiseCase struct {
	name       string
	opts       psp.SandboxOptions
	charged    bool          // the interrupted charge was made
	lookupLags bool          // the look-up misses the charge (forced not found)
	after      time.Duration // from the interruption to the resume
	completer  bool          // the completer resumes it, not the client's retry
	status     int           // the resume's answer
	order      string        // the order's status after it
	charges    int64         // charges of the order in the ledger
	resends    int           // Charge calls made by the resume
	owed       bool          // a compensation is owed
}

// checkPromise interrupts a key, resumes it as tc says, and reads the answer, the calls,
// the ledger and the rows.
func checkPromise(t *testing.T, tc promiseCase, overHTTP bool) {
	e := newPromiseEnv(t, tc.opts, overHTTP)
	ctx := context.Background()
	k := e.interrupt("k-1", tc.charged)
	order := e.str(`SELECT public_id FROM orders WHERE id = $1`, k.OrderID.Int64)
	e.advance(tc.after)
	if tc.lookupLags {
		e.forced.Force(psptest.OpLookupCharge, psp.ErrNotFound)
	}
	e.counting.Reset()
	status := 0
	if tc.completer {
		taken, err := keyed.TakeOver(ctx, e.s.q, k, e.now, e.s.cfg.Lease)
		if err != nil {
			t.Fatal(err)
		}
		r := e.s.ResolveCharge(ctx, taken, "test: abandoned")
		if r.Settle == nil {
			t.Fatalf("the completer could not settle: %v", r.Err)
		}
		ch, err := r.Settle(nil)
		if err != nil {
			t.Fatal(err)
		}
		status = http.StatusConflict
		if ch.Status == psp.StatusSucceeded {
			status = http.StatusCreated
		}
	} else {
		_, status = e.order("k-1", psp.TokenVisa, 2500)
	}
	calls := e.counting.Calls()
	if status != tc.status || e.orderStatus(order) != tc.order {
		t.Errorf("resumed: %d, order %s; want %d, %s", status, e.orderStatus(order), tc.status, tc.order)
	}
	if calls[psptest.OpCharge] != tc.resends {
		t.Errorf("the resume made %d charges, want %d (calls %v)", calls[psptest.OpCharge], tc.resends, calls)
	}
	if charges, _ := e.ledger(order); charges != tc.charges {
		t.Errorf("the ledger holds %d charges of the order, want %d", charges, tc.charges)
	}
	if owed := e.count(`SELECT count(*) FROM compensations WHERE order_id = $1`, k.OrderID.Int64); owed != map[bool]int64{false: 0, true: 1}[tc.owed] {
		t.Errorf("%d compensations owed, want owed %v", owed, tc.owed)
	}
	if tc.order == StatusPaid {
		if n := e.count(`SELECT count(*) FROM payments p JOIN orders o ON o.id = p.order_id
		                   WHERE o.public_id = $1 AND p.status = 'succeeded'`, order); n != 1 {
			t.Errorf("%d succeeded payments of the order, want 1", n)
		}
	}
	// The client's retry replays what the resume stored.
	e.forced.Force(psptest.OpLookupCharge, nil)
	e.counting.Reset()
	if _, again := e.order("k-1", psp.TokenVisa, 2500); again != tc.status {
		t.Errorf("the retry answered %d, want the stored %d", again, tc.status)
	}
	if calls := e.counting.Calls(); calls[psptest.OpCharge] != 0 {
		t.Errorf("the retry of a settled key charged: %v", calls)
	}
}

// TestALateChargeAfterAKeyLessGiveUpIsRefunded: at a key-less provider an interrupted order
// whose charge was never seen is given up on with a refund owed, and its answer says so;
// the frozen worker's request then arrives and is charged, and the compensation finds that
// charge by the order's reference and refunds it, once.
func TestALateChargeAfterAKeyLessGiveUpIsRefunded(t *testing.T) {
	e := newPromiseEnv(t, psp.SandboxOptions{KeyLess: true}, false)
	ctx := context.Background()
	k := e.interrupt("k-late", false)
	order := e.str(`SELECT public_id FROM orders WHERE id = $1`, k.OrderID.Int64)

	if _, status := e.order("k-late", psp.TokenVisa, 2500); status != http.StatusConflict {
		t.Fatalf("the resume answered %d, want 409 payment_abandoned", status)
	}
	stored := e.str(`SELECT convert_from(response_body, 'UTF8') FROM idempotency_keys WHERE client_id = $1 AND key = $2`,
		e.client.ID, "k-late")
	if !strings.Contains(stored, "payment_abandoned") || !strings.Contains(stored, "refunded in full automatically") {
		t.Errorf("the stored answer does not say that a charge that still appears is refunded: %s", stored)
	}
	if charges, _ := e.ledger(order); charges != 0 || e.orderStatus(order) != StatusCanceled {
		t.Fatalf("after the give-up: %d charges, order %s; want none, canceled", charges, e.orderStatus(order))
	}

	// The frozen worker's request reaches the provider now: a key-less provider charges it.
	if _, err := e.sb.Charge(ctx, psp.ChargeRequest{Key: providerKey("charge", k), Amount: 2500, Currency: "TRY",
		CardToken: psp.TokenVisa, Description: chargeDescription(order)}); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Minute)
	pass, err := e.s.compensateDue(ctx, 10, e.s.cfg.Lease)
	if err != nil || pass.Refunded != 1 {
		t.Fatalf("compensations: %+v, %v; want the late charge refunded", pass, err)
	}
	if charges, refunds := e.ledger(order); charges != 1 || refunds != 1 {
		t.Errorf("the ledger holds %d charges and %d refunds of the order, want 1 and 1", charges, refunds)
	}
	if state := e.str(`SELECT state FROM compensations WHERE order_id = $1`, k.OrderID.Int64); state != CompensationRefunded {
		t.Errorf("compensation %s, want %s", state, CompensationRefunded)
	}
	// A second pass finds the debt settled and refunds nothing more.
	e.advance(time.Hour)
	if pass, err := e.s.compensateDue(ctx, 10, e.s.cfg.Lease); err != nil || pass.Refunded != 0 {
		t.Errorf("a second pass: %+v, %v", pass, err)
	}
	if _, refunds := e.ledger(order); refunds != 1 {
		t.Errorf("%d refunds after a second pass, want 1", refunds)
	}
}
