package stdwebhook_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// A merchant's receiver: the same message delivered 20 times at once applies its effect
// once; a failed apply records nothing, and the retry applies it.
func TestReceiveAppliesOnce(t *testing.T) {
	d := dbtest.New(t).DB
	ctx := context.Background()
	for _, s := range []string{stdwebhook.ReceiptsTable, `CREATE TABLE paid_orders (order_id text PRIMARY KEY)`} {
		if _, err := d.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var applied atomic.Int64
	apply := func(tx *sql.Tx) error {
		applied.Add(1)
		_, err := tx.ExecContext(ctx, `INSERT INTO paid_orders VALUES ('ord_1')`) // fails if applied twice
		return err
	}
	var wg sync.WaitGroup
	var dups atomic.Int64
	for range 20 {
		wg.Go(func() {
			dup, err := stdwebhook.Receive(ctx, d, stdwebhook.Message{ID: "evt_1"}, apply)
			if err != nil {
				t.Error(err)
			}
			if dup {
				dups.Add(1)
			}
		})
	}
	wg.Wait()
	if applied.Load() != 1 || dups.Load() != 19 {
		t.Fatalf("applied %d times, %d duplicates; want 1 and 19", applied.Load(), dups.Load())
	}

	boom := errors.New("the merchant's database said no")
	if _, err := stdwebhook.Receive(ctx, d, stdwebhook.Message{ID: "evt_2"}, func(*sql.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failed apply: %v", err)
	}
	dup, err := stdwebhook.Receive(ctx, d, stdwebhook.Message{ID: "evt_2"}, func(*sql.Tx) error { return nil })
	if err != nil || dup {
		t.Fatalf("the retry after a failed apply: duplicate=%v %v", dup, err)
	}
	var n int
	if err := d.QueryRowContext(ctx, `SELECT count(*) FROM webhook_receipts`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d receipts, %v", n, err)
	}
}
