package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestInstallmentsRunTwiceAtOnceAndKilledHalfWay: 12 orders of a client in Istanbul, each in
// 3 installments on a saved card, the second due on Feb 10 there. One `tekrar installments
// run` dies right after the provider charged its first installment, before tekrar recorded
// it; a second is SIGKILLed as soon as it has charged one; then two run at once to the end.
// Each due installment must be charged exactly once at the provider, recorded paid with
// that charge and with one installment.paid event naming it, and nothing not yet due
// charged.
func TestInstallmentsRunTwiceAtOnceAndKilledHalfWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	client, err := clients.CreateWith(ctx, db, "shop", clients.NewSecret(),
		clients.Settings{KeyTTL: 24 * time.Hour, TombstoneGrace: 30 * 24 * time.Hour, TimeZone: "Europe/Istanbul"})
	if err != nil {
		t.Fatal(err)
	}
	sandbox := psp.NewSandbox(db, psp.SandboxOptions{})
	pm, err := sandbox.SavePaymentMethod(ctx, client.ProviderCustomer("cus_1"), psp.TokenVisa)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2027, 1, 10, 9, 0, 0, 0, time.UTC)
	svc := checkout.NewService(db, sandbox, checkout.Config{Routes: api.Routes, Now: func() time.Time { return created }}, slog.New(slog.DiscardHandler))
	defer svc.Close()
	const orders = 12
	for i := range orders {
		amount := int64(3000 + i)
		in := checkout.OrderInput{Currency: "TRY", Amount: amount, Installments: 3,
			Payment: checkout.PaymentInput{Customer: "cus_1", PaymentMethod: pm.ID},
			Items:   []checkout.Item{{SKU: "SOFA", Name: "Sofa", Quantity: 1, UnitAmount: amount}}}
		body, _ := json.Marshal(in)
		res, err := svc.CreateOrder(ctx, checkout.Request{Client: client, Key: fmt.Sprintf("k-%d", i), Method: "POST",
			Path: "/v1/orders", Body: body}, checkout.Lookup{}, in)
		if err != nil || res.Status != 201 {
			t.Fatalf("order %d: %d %s %v", i, res.Status, res.Body, err)
		}
	}

	// Feb 10 starts in Istanbul at 21:00 UTC on Feb 9.
	const at = "2027-02-09T21:00:00Z"
	env := func(extra ...string) []string {
		return childEnv(append([]string{"DATABASE_URL=" + dbURL, "TEKRAR_LOG_LEVEL=info", "TEKRAR_LEASE=1s"}, extra...)...)
	}
	leasesLapsed := func() bool {
		return countRows(t, db, `SELECT count(*) FROM installments WHERE lease_expires_at > now()`) == 0
	}
	paid := func() int {
		return countRows(t, db, `SELECT count(*) FROM installments WHERE n = 2 AND status = 'paid'`)
	}

	// Killed after the provider charged its first installment, before tekrar recorded it.
	stdout, stderr, code := runTekrar(t, env("TEKRAR_CRASH_AT=installment_after_provider"), nil, "installments", "run", "--at", at)
	if code != 3 || !strings.Contains(stderr, "installment_after_provider") {
		t.Fatalf("run armed at installment_after_provider exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if n := countRows(t, db, `SELECT count(*) FROM psp_charges WHERE description LIKE '% installment 2'`); n != 1 || paid() != 0 {
		t.Fatalf("after the crash: %d installment charges at the provider, %d recorded; want 1 and 0", n, paid())
	}

	// SIGKILLed as soon as it has charged one: wherever the kill lands, the runs below finish.
	waitUntil(t, 30*time.Second, "the crashed run's lease to lapse", leasesLapsed)
	killed := startTekrar(t, env(), nil, "installments", "run", "--at", at)
	waitUntil(t, 30*time.Second, "an installment to be charged", func() bool {
		return strings.Contains(killed.stderr.String(), "installment charged") || killed.exited()
	})
	_ = killed.cmd.Process.Signal(syscall.SIGKILL)
	if code := killed.wait(t, 30*time.Second); code != -1 {
		t.Logf("the run finished (exit %d) before SIGKILL landed", code)
	}
	t.Logf("after the kill: %d of %d paid", paid(), orders)

	// Two at once, to the end.
	waitUntil(t, 30*time.Second, "the killed run's leases to lapse", leasesLapsed)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := startTekrar(t, env(), nil, "installments", "run", "--at", at)
			if code := p.wait(t, time.Minute); code != 0 {
				t.Errorf("concurrent run %d exited %d\nstdout:\n%s\nstderr:\n%s", i, code, p.stdout, p.stderr)
			}
		}()
	}
	wg.Wait()

	type ledger struct{ Charges, Succeeded, Recorded, Events, Third int }
	var ids []int64
	if err := db.Select(&ids, `SELECT id FROM orders ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		var public string
		if err := db.Get(&public, `SELECT public_id FROM orders WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		desc := fmt.Sprintf("order %s installment 2", public)
		got := ledger{
			Charges:   countRows(t, db, `SELECT count(*) FROM psp_charges WHERE description = $1`, desc),
			Succeeded: countRows(t, db, `SELECT count(*) FROM psp_charges WHERE description = $1 AND status = 'succeeded'`, desc),
			Recorded: countRows(t, db, `SELECT count(*) FROM installments i JOIN psp_charges c
				 ON c.id = i.provider_charge_id AND c.key = i.provider_key AND c.amount = i.amount
				 WHERE i.order_id = $1 AND i.n = 2 AND i.status = 'paid' AND c.description = $2`, id, desc),
			Events: countRows(t, db, `SELECT count(*) FROM outbox_events e JOIN installments i
				 ON i.order_id = e.order_id AND i.n = 2 AND e.payload->'installment'->>'charge' = i.provider_charge_id
				 WHERE e.order_id = $1 AND e.type = 'installment.paid' AND e.payload->'installment'->>'n' = '2'`, id),
			Third: countRows(t, db, `SELECT count(*) FROM psp_charges WHERE description = $1`, fmt.Sprintf("order %s installment 3", public)),
		}
		if want := (ledger{1, 1, 1, 1, 0}); got != want {
			t.Errorf("order %d: %+v, want %+v", id, got, want)
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM outbox_events WHERE type LIKE 'installment.%'`); n != orders {
		t.Errorf("%d installment events, want one per paid installment (%d)", n, orders)
	}
	if n := countRows(t, db, `SELECT count(*) FROM orders o WHERE captured_amount <> (SELECT sum(amount) FROM installments WHERE order_id = o.id AND status = 'paid')`); n != 0 {
		t.Errorf("%d orders whose captured amount is not what their paid installments add up to", n)
	}
}
