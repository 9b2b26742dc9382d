package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// The seeding client and the measured loop must send the same bytes for a key, or the
// measured requests would be refused as reuse instead of replayed.
func TestSeedBodyIsTheMeasuredBody(t *testing.T) {
	l := &loader{run: "r"}
	for _, n := range []int64{0, 1, 999, 1000, 123456, 1<<40 + 7} {
		b, err := json.Marshal(l.order(n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, l.body(n)) {
			t.Errorf("%d: client sends %s, the loop %s", n, b, l.body(n))
		}
	}
}

// TestSeededKeysReplay: keys seeded through the client are replayed to the measured loop's
// connection, one order each.
func TestSeededKeysReplay(t *testing.T) {
	e := apptest.New(t)
	target, err := newConn(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	l := &loader{target: *target, url: e.URL, secret: e.Secret, run: "seed", replay: true}
	const n = 20
	if err := l.seed(n, 4); err != nil {
		t.Fatal(err)
	}
	c := l.worker()
	defer c.close()
	for i := int64(0); i < n; i++ {
		rep, err := l.send(c, i)
		if err != nil || rep.status != 201 || !rep.replayed {
			t.Fatalf("key %d: %+v %v", i, rep, err)
		}
	}
	var orders int
	if err := e.DB.GetContext(context.Background(), &orders, `SELECT count(*) FROM orders`); err != nil || orders != n {
		t.Fatalf("%d orders (%v), want %d", orders, err, n)
	}
}
