package main

// A worker frozen past its lease (SIGSTOP: a GC pause, a VM migration, CPU starvation) while
// its charge is still in flight at a provider slower than lease + grace. Another replica's
// completer gives up on the key meanwhile. Whatever the frozen worker does next (dies without
// waking, wakes while Postgres is down, wakes while the provider is down), every charge the
// provider made must end with a paid order or a recorded refund.

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/proctest"
)

// TestFrozenWorkerNeverLeavesAChargeBehind runs the scenario against real processes: two
// `serve` replicas and a `tekrar psp`, all on one database, the provider in each of the
// crash harness's modes (crashProviders): one that fences, one that cannot (--no-cancel),
// and one that keeps no keys (--keyless). Not parallel: one variant stops the test binary's database server.
func TestFrozenWorkerNeverLeavesAChargeBehind(t *testing.T) {
	for _, provider := range []struct {
		name string
		mode string // a crashProviders name
	}{
		{"provider fences", "keys"},
		{"provider cannot fence", "no-cancel"},
		{"provider keeps no keys", "keyless"},
	} {
		i := slices.IndexFunc(crashProviders, func(p crashProvider) bool { return p.name == provider.mode })
		for _, wake := range []string{"killed without waking", "wakes while Postgres is down", "wakes while the provider is down"} {
			t.Run(provider.name+"/"+wake, func(t *testing.T) {
				if wake == "wakes while Postgres is down" && os.Getenv(dbtest.EnvURL) != "" {
					t.Skip("stops the private test database server; unset " + dbtest.EnvURL)
				}
				runFrozen(t, crashProviders[i], wake)
			})
		}
	}
}

// late is how long the provider takes over the frozen worker's charge: longer than the
// lease (1 s) and the completer's grace (1 s) together, with room to spare on a loaded
// machine, so that the completer gives up first.
const late = 6 * time.Second

func runFrozen(t *testing.T, provider crashProvider, wake string) {
	fence := provider.fences
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	ports := freePorts(t, 3)

	pspAddr := addrOf(ports[2])
	pspEnv := childEnv("DATABASE_URL="+dbURL, "TEKRAR_PSP_ADDR="+pspAddr, "TEKRAR_PSP_SLOW_DELAY="+late.String())
	pspArgs := append([]string{"psp"}, provider.flags...)
	psp := startTekrar(t, pspEnv, nil, pspArgs...)
	proctest.WaitUp(t, psp.Proc, "http://"+pspAddr, "/refunds/none", 30*time.Second)
	secret := newClientSecret(t, dbURL, "frozen app")

	common := []string{"DATABASE_URL=" + dbURL, "TEKRAR_PSP_URL=http://" + pspAddr, "TEKRAR_LOG_LEVEL=warn",
		"TEKRAR_LEASE=1s", "TEKRAR_COMPLETER_GRACE=1s", "TEKRAR_PROVIDER_TIMEOUT=30s",
		"TEKRAR_PROVIDER_HORIZON=2m", "TEKRAR_SWEEP_INTERVAL=24h"}
	// A, the worker that freezes; its completer would only join B's.
	a, baseA := startServe(t, dbURL, ports[0], append(common, "TEKRAR_COMPLETER_INTERVAL=1h")...)
	b, baseB := startServe(t, dbURL, ports[1], append(common, "TEKRAR_COMPLETER_INTERVAL=200ms")...)
	t.Cleanup(func() {
		if t.Failed() {
			var rows []map[string]any
			if r, err := db.Queryx(`SELECT id, state, lease_expires_at, lease_token, now() AS now FROM idempotency_keys`); err == nil {
				for r.Next() {
					m := map[string]any{}
					_ = r.MapScan(m)
					rows = append(rows, m)
				}
				r.Close()
			}
			cr, _ := send(newHTTPClient(), "GET", baseB+"/readyz/completer", "", nil)
			t.Logf("keys: %v\nB's completer: %s", rows, cr.Body)
			t.Logf("A's stderr:\n%s\nB's stderr:\n%s\nprovider's stderr:\n%s", a.stderr, b.stderr, psp.stderr)
		}
	})

	c := newHTTPClient()
	c.Timeout = time.Minute
	body := orderJSONBody(9000, "tok_late")
	go func() { _, _ = send(c, "POST", baseA+"/v1/orders", secret, body, "Idempotency-Key", "frozen-1") }()

	// 1. A has claimed the key and its charge is at the provider: freeze A.
	waitUntil(t, 30*time.Second, "the provider to receive A's charge", func() bool {
		return strings.Contains(psp.stderr.String(), "late charge received")
	})
	a.signal(t, syscall.SIGSTOP)
	frozen := true
	t.Cleanup(func() {
		if frozen {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	})

	// 2. B's completer gives up on the key: the order is canceled.
	waitUntil(t, 30*time.Second, "B's completer to cancel the order", func() bool {
		return countRows(t, db, `SELECT count(*) FROM orders WHERE status = 'canceled'`) == 1
	})

	// 3. The provider finishes A's request: refused under the canceled key, or made.
	if fence {
		waitUntil(t, 30*time.Second, "the provider to refuse the late charge", func() bool {
			return strings.Contains(psp.stderr.String(), "charge refused: its key was canceled")
		})
	} else {
		waitUntil(t, 30*time.Second, "the late charge to be made", func() bool {
			return countRows(t, db, `SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`) == 1
		})
	}

	// 4. What becomes of A.
	wakeA := func() {
		a.signal(t, syscall.SIGCONT)
		frozen = false
	}
	switch wake {
	case "killed without waking":
		a.signal(t, syscall.SIGKILL)
		frozen = false
	case "wakes while Postgres is down":
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := dbtest.Server(t).RestartAfter(ctx, func() {
			wakeA()
			time.Sleep(1500 * time.Millisecond) // A reads its answer and fails to write it
		})
		if err != nil {
			t.Fatalf("restart the database: %v", err)
		}
	case "wakes while the provider is down":
		psp.signal(t, syscall.SIGKILL)
		psp.wait(t, 10*time.Second)
		wakeA()
		if !fence {
			// The refund owed is retried through the outage, not dropped.
			waitUntil(t, 30*time.Second, "the compensation to be retried during the outage", func() bool {
				return countRows(t, db, `SELECT count(*) FROM compensations WHERE attempts >= 2 AND last_error IS NOT NULL`) == 1
			})
		} else {
			time.Sleep(1500 * time.Millisecond) // A reads its answer
		}
		psp = startTekrar(t, pspEnv, nil, pspArgs...)
		proctest.WaitUp(t, psp.Proc, "http://"+pspAddr, "/refunds/none", 30*time.Second)
	}

	// 5. Every charge the provider made ends paid or refunded, once.
	waitUntil(t, 60*time.Second, "every charge to be paid or refunded", func() bool {
		return unsettledCharges(t, db) == 0 && countRows(t, db, `SELECT count(*) FROM compensations WHERE state = 'watching'`) == 0
	})
	if n := unsettledCharges(t, db); n != 0 {
		t.Fatalf("%d charges without a paid order or a refund", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM orders WHERE status = 'paid'`); n != 0 {
		t.Fatalf("%d paid orders: the order was canceled and must stay so", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE state <> 'completed'`); n != 0 {
		t.Fatalf("%d keys not completed", n)
	}
	replay := problemOf(t, mustSend(t, c, "POST", baseB+"/v1/orders", secret, body, "Idempotency-Key", "frozen-1"), 409, "payment_abandoned")
	says := strings.Contains(replay["detail"].(string), "nothing was charged")
	if fence {
		if n := countRows(t, db, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 0 {
			t.Fatalf("%d charges under a canceled key", n)
		}
		if !says {
			t.Errorf("a fenced key's answer should say nothing was charged: %v", replay["detail"])
		}
		return
	}
	if says {
		t.Errorf("without a fence the answer must not claim nothing was charged: %v", replay["detail"])
	}
	if n := countRows(t, db, `SELECT count(*) FROM psp_refunds`); n != 1 {
		t.Fatalf("%d refunds at the provider, want exactly 1", n)
	}
	if n := countRows(t, db, `
		SELECT count(*) FROM compensations c
		  JOIN psp_refunds r ON r.id = c.refund_id AND r.charge_id = c.charge_id
		 WHERE c.state = 'refunded' AND c.amount = 9000 AND r.amount = 9000`); n != 1 {
		t.Fatal("the refund is not recorded in tekrar")
	}
}

// unsettledCharges counts the provider's succeeded charges that are neither the payment of a
// paid order nor refunded in full with the refund recorded in tekrar.
func unsettledCharges(t *testing.T, db *sqlx.DB) int {
	t.Helper()
	return countRows(t, db, `
		SELECT count(*) FROM psp_charges ch
		 WHERE ch.status = 'succeeded'
		   AND NOT EXISTS (SELECT 1 FROM payments p JOIN orders o ON o.id = p.order_id
		                    WHERE p.provider_charge_id = ch.id AND o.status = 'paid')
		   AND NOT EXISTS (SELECT 1 FROM compensations c JOIN psp_refunds r ON r.id = c.refund_id
		                    WHERE c.charge_id = ch.id AND c.state = 'refunded' AND r.amount = ch.amount)`)
}
