package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/sweeper"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/problem"
)

// replica is one process of a deployment on the environment's database: its own pool,
// service and replay cache, whose listener runs until the test ends, and its operator's
// actions.
type replica struct {
	svc   *checkout.Service
	cache *checkout.ReplayCache
	ops   *Actions
}

func newReplica(t *testing.T, e *checkouttest.Env) *replica {
	t.Helper()
	return newReplicaAt(t, e, e.Now)
}

// newReplicaAt is a replica on the clock now.
func newReplicaAt(t *testing.T, e *checkouttest.Env, now func() time.Time) *replica {
	t.Helper()
	c := checkout.NewReplayCache(checkout.ReplayCacheConfig{Bytes: 1 << 20, Beat: 50 * time.Millisecond, Stale: 2 * time.Second})
	pool := dbtest.Connect(t, e.URL)
	svc := checkout.NewService(pool, e.Provider, checkout.Config{Routes: api.Routes, Now: now, ReplayCache: c},
		slog.New(slog.DiscardHandler))
	t.Cleanup(svc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Listen(ctx, e.URL, pool, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the replay cache to serve", c.Serving)
	return &replica{svc: svc, cache: c, ops: New(pool, svc)}
}

func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// orderOf is an order of amount paid with the sandbox's visa token, and its body.
func orderOf(amount int64) (checkout.OrderInput, []byte) {
	in := checkout.OrderInput{Currency: "TRY", Amount: amount, Payment: checkout.PaymentInput{CardToken: psp.TokenVisa},
		Items: []checkout.Item{{SKU: "LATTE", Name: "Latte", Quantity: 1, UnitAmount: amount}}}
	body, _ := json.Marshal(in)
	return in, body
}

func orderRequest(c clients.Client, key string, body []byte) checkout.Request {
	return checkout.Request{Client: c, Key: key, Method: "POST", Path: "/v1/orders", Body: body}
}

// send is what the API does with a POST /v1/orders: Replay first, then, when it did not
// answer, the order with Replay's lookup. fromMemory says the cache answered (its hits
// grew: a test that sends from one goroutine).
func (r *replica) send(t *testing.T, c clients.Client, key string, amount int64) (res checkout.Result, err error, fromMemory bool) {
	t.Helper()
	in, body := orderOf(amount)
	req := orderRequest(c, key, body)
	hits := r.cache.Hits()
	res, lk, ok := r.svc.Replay(context.Background(), req)
	if ok {
		return res, nil, r.cache.Hits() > hits
	}
	res, err = r.svc.CreateOrder(context.Background(), req, lk, in)
	return res, err, false
}

// TestReplayFromMemoryReadsNothing: a replay the cache holds answers the same status,
// headers, bytes and expiry as a replay read from the database, and records its replayed
// entry, while idempotency_keys is locked against every read (a replay that read it would
// wait: the same replay on a service without a cache does).
func TestReplayFromMemoryReadsNothing(t *testing.T) {
	e := checkouttest.New(t, checkouttest.Options{})
	a := newReplica(t, e)
	if res, err, _ := a.send(t, e.Client, "k", 1200); err != nil || res.Status != http.StatusCreated {
		t.Fatalf("first arrival: %d %v", res.Status, err)
	}
	_, body := orderOf(1200)
	req := orderRequest(e.Client, "k", body)
	fromDB, _, ok := e.Service.Replay(context.Background(), req)
	if !ok {
		t.Fatal("the database's replay did not answer")
	}
	if _, _, ok := a.svc.Replay(context.Background(), req); !ok || !a.cache.Holds(e.Client.ID, "k") {
		t.Fatalf("a replay read from the database did not fill the cache (answered %v)", ok)
	}

	tx := e.DB.MustBegin()
	tx.MustExec(`LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE`)
	blocked := make(chan bool, 1)
	go func() { _, _, ok := e.Service.Replay(context.Background(), req); blocked <- ok }()
	select {
	case <-blocked:
		_ = tx.Rollback()
		t.Fatal("a replay read from the database answered while the table was locked: the lock proves nothing")
	case <-time.After(300 * time.Millisecond):
	}
	hit := make(chan checkout.Result, 1)
	go func() {
		res, _, ok := a.svc.Replay(context.Background(), req)
		if !ok {
			res.Status = 0
		}
		hit <- res
	}()
	var got checkout.Result
	select {
	case got = <-hit:
	case <-time.After(5 * time.Second):
		_ = tx.Rollback()
		<-hit
		t.Fatal("the cached replay waited for the locked table: it read the database")
	}
	_ = tx.Rollback()
	if !<-blocked {
		t.Error("the blocked replay did not answer once the lock was gone")
	}
	if got.Status != fromDB.Status || !reflect.DeepEqual(got.Header, fromDB.Header) || !bytes.Equal(got.Body, fromDB.Body) ||
		!got.ExpiresAt.Equal(fromDB.ExpiresAt) || !got.Replayed {
		t.Errorf("from memory: %d %v %s %s replayed=%v\nfrom the database: %d %v %s %s", got.Status, got.Header, got.Body,
			got.ExpiresAt, got.Replayed, fromDB.Status, fromDB.Header, fromDB.Body, fromDB.ExpiresAt)
	}
	e.Service.FlushHistory()
	a.svc.FlushHistory()
	// The database's replay, the blocked one, the one that filled the cache and the hit.
	if n := e.Count(`SELECT count(*) FROM key_events WHERE client_id = $1 AND key = 'k' AND kind = 'replayed'
		AND status = 201 AND key_id = (SELECT id FROM idempotency_keys WHERE key = 'k')`, e.Client.ID); n != 4 {
		t.Errorf("%d replayed entries in the key's history, want 4", n)
	}
}

// TestReplayCacheKeepsItsPromises: another client's key of the same name, another body and
// an expired key are never answered from memory: each gets what the database answers.
func TestReplayCacheKeepsItsPromises(t *testing.T) {
	e := checkouttest.New(t, checkouttest.Options{})
	a := newReplica(t, e)
	a.send(t, e.Client, "k", 1200)
	a.send(t, e.Client, "k", 1200)
	if _, _, fromMemory := a.send(t, e.Client, "k", 1200); !fromMemory {
		t.Fatal("the replay was not cached")
	}
	other, err := clients.CreateWith(context.Background(), e.DB, "other", clients.NewSecret(), clients.DefaultSettings)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		client clients.Client
		amount int64
		status int
		code   problem.Code
	}{
		{"another client's key of the same name is its own", other, 1200, http.StatusCreated, ""},
		{"another body is a reused key", e.Client, 1300, http.StatusUnprocessableEntity, problem.CodeIdempotencyKeyReused},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err, served := a.send(t, c.client, "k", c.amount)
			status, _ := checkouttest.Status(res, err)
			if served || status != c.status || checkouttest.ProblemCode(err) != string(c.code) {
				t.Errorf("served from memory %v, %d %v; want %d %s from the database", served, status, err, c.status, c.code)
			}
		})
	}
	t.Run("an expired key is refused and dropped", func(t *testing.T) {
		e.Advance(e.Client.KeyTTL)
		res, err, served := a.send(t, e.Client, "k", 1200)
		status, _ := checkouttest.Status(res, err)
		if served || checkouttest.ProblemCode(err) != string(problem.CodeIdempotencyKeyExpired) {
			t.Errorf("at its expiry: served from memory %v, %d %v; want 422 idempotency_key_expired", served, status, err)
		}
		if a.cache.Holds(e.Client.ID, "k") {
			t.Error("the expired key is still cached")
		}
	})
}

// TestExpireNowReachesEveryReplica: two replicas hold a key's answer; the operator's
// "expire now" on one drops it there at once and on the other when the notification of
// its commit arrives, and the next replay on the other is refused as expired, as the
// database answers it.
func TestExpireNowReachesEveryReplica(t *testing.T) {
	e := checkouttest.New(t, checkouttest.Options{})
	a, b := newReplica(t, e), newReplica(t, e)
	a.send(t, e.Client, "k", 1200)
	for _, r := range []*replica{a, b} {
		r.send(t, e.Client, "k", 1200)
		if _, _, fromMemory := r.send(t, e.Client, "k", 1200); !fromMemory {
			t.Fatal("a replica did not answer from memory")
		}
	}
	res, err := a.ops.ExpireKey(context.Background(), e.Client.ID, "k",
		func(context.Context, *sqlx.Tx, map[string]any) error { return nil })
	if err != nil || !res.Done {
		t.Fatalf("expire now: %+v %v", res, err)
	}
	if a.cache.Holds(e.Client.ID, "k") {
		t.Error("the replica that expired the key still holds it")
	}
	took := waitFor(t, "the other replica to drop the key", func() bool { return !b.cache.Holds(e.Client.ID, "k") })
	t.Logf("the other replica dropped the key %s after the action's commit", took)
	for name, r := range map[string]*replica{"a": a, "b": b} {
		res, err, served := r.send(t, e.Client, "k", 1200)
		status, _ := checkouttest.Status(res, err)
		if served || checkouttest.ProblemCode(err) != string(problem.CodeIdempotencyKeyExpired) {
			t.Errorf("%s after expire now: served from memory %v, %d %v; want 422 idempotency_key_expired", name, served, status, err)
		}
	}
}

// TestALostListenerDropsTheCache: the listener's connection terminated, the cache drops
// every answer and keeps none until its listener is back and has heard a beat; then it
// fills again.
func TestALostListenerDropsTheCache(t *testing.T) {
	e := checkouttest.New(t, checkouttest.Options{})
	a := newReplica(t, e)
	a.send(t, e.Client, "k", 1200)
	a.send(t, e.Client, "k", 1200)
	if !a.cache.Holds(e.Client.ID, "k") {
		t.Fatal("the replay was not cached")
	}
	listener := `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'`
	pid := e.Count(listener)
	e.Count(`SELECT CAST(pg_terminate_backend($1) AS int)`, pid)
	waitFor(t, "the cache to drop everything", func() bool { return a.cache.Len() == 0 })
	for !a.cache.Serving() {
		a.send(t, e.Client, "k", 1200)
		if !a.cache.Serving() && a.cache.Len() != 0 {
			t.Fatal("the cache kept an answer while its listener was away")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if e.Count(listener) == pid {
		t.Error("the cache serves again on the terminated listener")
	}
	waitFor(t, "the cache to fill again", func() bool {
		a.send(t, e.Client, "k", 1200)
		return a.cache.Holds(e.Client.ID, "k")
	})
}

// TestReplaysAndExpiriesAtOnce: two replicas replay keys from many goroutines while their
// operators expire the keys one by one. Every answer served is its own key's, and once every
// expiry has reached both caches nothing is served from memory and every key is refused as
// expired.
func TestReplaysAndExpiriesAtOnce(t *testing.T) {
	e := checkouttest.New(t, checkouttest.Options{})
	a, b := newReplica(t, e), newReplica(t, e)
	replicas := []*replica{a, b}
	const keys = 12
	answers := make([][]byte, keys)
	for i := range keys {
		res, err, _ := a.send(t, e.Client, fmt.Sprint("k", i), 1000+int64(i))
		if err != nil || res.Status != http.StatusCreated {
			t.Fatalf("order %d: %d %v", i, res.Status, err)
		}
		answers[i] = res.Body
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				i := rand.IntN(keys)
				in, body := orderOf(1000 + int64(i))
				r := replicas[g%2]
				req := orderRequest(e.Client, fmt.Sprint("k", i), body)
				res, lk, ok := r.svc.Replay(context.Background(), req)
				if ok {
					if !bytes.Equal(res.Body, answers[i]) {
						t.Errorf("key %d answered another answer: %s", i, res.Body)
					}
					continue
				}
				if _, err := r.svc.CreateOrder(context.Background(), req, lk, in); err != nil &&
					checkouttest.ProblemCode(err) != string(problem.CodeIdempotencyKeyExpired) {
					t.Errorf("key %d: %v", i, err)
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	for i := range keys {
		if _, err := replicas[i%2].ops.ExpireKey(context.Background(), e.Client.ID, fmt.Sprint("k", i),
			func(context.Context, *sqlx.Tx, map[string]any) error { return nil }); err != nil {
			t.Errorf("expire k%d: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "every expiry to reach both caches", func() bool { return a.cache.Len() == 0 && b.cache.Len() == 0 })
	stop.Store(true)
	wg.Wait()
	if a.cache.Hits() == 0 || b.cache.Hits() == 0 {
		t.Errorf("replays served from memory: %d and %d; want some on each replica", a.cache.Hits(), b.cache.Hits())
	}
	for i := range keys {
		for _, r := range replicas {
			if _, err, fromMemory := r.send(t, e.Client, fmt.Sprint("k", i), 1000+int64(i)); fromMemory ||
				checkouttest.ProblemCode(err) != string(problem.CodeIdempotencyKeyExpired) {
				t.Errorf("k%d after its expiry: served from memory %v, %v", i, fromMemory, err)
			}
		}
	}
}

// TestASweptKeyLeavesEveryCache: the sweeper's delete notifies too, so a replica whose
// clock is behind the sweeper's (its key not expired yet by its own clock) drops the swept
// key and answers the retry from the database: refused as expired, from the tombstone.
func TestASweptKeyLeavesEveryCache(t *testing.T) {
	e := checkouttest.New(t, checkouttest.Options{})
	behind := e.Now()
	a := newReplicaAt(t, e, func() time.Time { return behind })
	a.send(t, e.Client, "k", 1200)
	a.send(t, e.Client, "k", 1200)
	if !a.cache.Holds(e.Client.ID, "k") {
		t.Fatal("the replay was not cached")
	}
	e.Advance(e.Client.KeyTTL)
	sw := sweeper.New(e.DB, sweeper.Config{Now: e.Now}, slog.New(slog.DiscardHandler))
	if r, err := sw.Pass(context.Background()); err != nil || r.KeysTombstoned != 1 {
		t.Fatalf("sweep: %+v %v", r, err)
	}
	if !a.cache.Holds(e.Client.ID, "k") {
		t.Fatal("a tombstone's write dropped the key: the test shows nothing of the delete")
	}
	e.Advance(2 * time.Minute)
	if r, err := sw.Pass(context.Background()); err != nil || r.KeysDeleted != 1 {
		t.Fatalf("second sweep: %+v %v", r, err)
	}
	waitFor(t, "the swept key to leave the cache", func() bool { return !a.cache.Holds(e.Client.ID, "k") })
	res, err, fromMemory := a.send(t, e.Client, "k", 1200)
	if status, _ := checkouttest.Status(res, err); fromMemory || checkouttest.ProblemCode(err) != string(problem.CodeIdempotencyKeyExpired) {
		t.Errorf("after the sweep: served from memory %v, %d %v; want 422 idempotency_key_expired", fromMemory, status, err)
	}
}
