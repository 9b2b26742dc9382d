package deliveries_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
)

// One client's endpoints that never answer do not delay another client's deliveries: the
// issue's two clients on one River client of 20 delivery workers, as every process runs.
// Client A has 20 endpoints whose server never answers (tekrar's 10 s timeout ends each
// attempt) and makes a burst of 10 events, 200 deliveries; client B has one healthy
// endpoint. B's latency (the event written → B's endpoint has it) is measured in a quiet run
// and with A's burst, and must stay within twice the quiet one; without a bound on A's
// attempts in flight, B's deliveries wait behind ten waves of 20 attempts of 10 s. At the
// dead server, A never has more than ClientInFlight attempts in flight, nor any endpoint more
// than EndpointInFlight.
func TestADeadClientDoesNotDelayAnother(t *testing.T) {
	f := newFixture(t)
	f.deliverer.Now = nil // River schedules on the wall clock
	f.deliverer.Client = deliveries.NewHTTPClient(deliveries.Policy{AllowLoopback: true}, deliveries.AttemptTimeout)
	const poll = 200 * time.Millisecond

	var mu sync.Mutex
	arrived := map[string]time.Time{} // B's webhook-ids, when each first arrived
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if id := r.Header.Get(stdwebhook.HeaderID); arrived[id].IsZero() {
			arrived[id] = time.Now()
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer healthy.Close()

	stop := make(chan struct{})
	var clientNow, clientMost int
	endpointNow, endpointMost := map[string]int{}, 0
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read to the end: the server then sees tekrar hang up
		mu.Lock()
		clientNow++
		endpointNow[r.URL.Path]++
		clientMost = max(clientMost, clientNow)
		endpointMost = max(endpointMost, endpointNow[r.URL.Path])
		mu.Unlock()
		defer func() {
			mu.Lock()
			clientNow--
			endpointNow[r.URL.Path]--
			mu.Unlock()
		}()
		select { // never answers: tekrar's timeout ends the attempt, or the test its end
		case <-r.Context().Done():
		case <-stop:
			panic(http.ErrAbortHandler)
		}
	}))
	defer dead.Close()

	a, b := f.client(t, "noisy"), f.client(t, "quiet")
	f.endpoint(t, b, healthy.URL)
	for i := range 20 {
		f.endpoint(t, a, fmt.Sprintf("%s/hook/%d", dead.URL, i))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	workers := river.NewWorkers()
	deliveries.AddWorkers(workers, f.deliverer)
	rc, err := outbox.NewClient(f.db.DB, workers, outbox.Config{Handlers: []outbox.Handler{deliveries.Handler{}}, PollInterval: poll,
		Queues: map[string]river.QueueConfig{deliveries.Queue: {MaxWorkers: 20}}}) // as internal/app
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rc.Stop(context.Background())
	defer close(stop) // before River stops: the attempts in flight end

	// latencies writes B's events one after another and returns how long each took to
	// arrive, sorted.
	latencies := func(run string) []time.Duration {
		t.Helper()
		var got []time.Duration
		for i := range 5 {
			start := time.Now()
			ev, err := outbox.Insert(ctx, f.db, b, outbox.OrderPaid, sql.NullInt64{}, map[string]any{"order": fmt.Sprintf("%s-%d", run, i)})
			if err != nil {
				t.Fatal(err)
			}
			for {
				mu.Lock()
				at := arrived[ev.ID]
				mu.Unlock()
				if !at.IsZero() {
					got = append(got, at.Sub(start))
					break
				}
				if time.Since(start) > 2*time.Minute {
					t.Fatalf("%s run: B's event %d not delivered after %s (before it: %v)", run, i, time.Since(start), got)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		slices.Sort(got)
		return got
	}

	quiet := latencies("quiet")
	for i := range 10 {
		if _, err := outbox.Insert(ctx, f.db, a, outbox.OrderPaid, sql.NullInt64{}, map[string]any{"order": fmt.Sprintf("burst-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for { // A's burst is fanned out and its attempts hang
		var n int
		if err := f.db.Get(&n, `SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE e.client_id = $1`, a); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		hanging := clientNow
		mu.Unlock()
		if n == 200 && hanging > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("A's burst: %d deliveries, %d attempts in flight", n, hanging)
		}
		time.Sleep(20 * time.Millisecond)
	}
	noisy := latencies("noisy")

	mu.Lock()
	most, mostEndpoint := clientMost, endpointMost
	mu.Unlock()
	median := func(d []time.Duration) time.Duration { return d[len(d)/2] }
	t.Logf("B's delivery latency: quiet median %s max %s; with A's 200 hanging deliveries median %s max %s; A's attempts in flight at most %d, per endpoint %d",
		median(quiet), quiet[len(quiet)-1], median(noisy), noisy[len(noisy)-1], most, mostEndpoint)
	// A quiet run can be faster than River's polls make a run under load: the quiet figure
	// is taken as at least two polls (the dispatch's and the delivery's), so that a lucky
	// quiet run does not make the bound one that no run can meet.
	floor := max(median(quiet), 2*poll)
	if median(noisy) > 2*floor {
		t.Errorf("B's median latency with A's dead endpoints %s, more than twice the quiet %s (floored at %s)", median(noisy), median(quiet), floor)
	}
	if most > deliveries.ClientInFlight || mostEndpoint > deliveries.EndpointInFlight {
		t.Errorf("A had %d attempts in flight at once, one endpoint %d; the caps are %d and %d",
			most, mostEndpoint, deliveries.ClientInFlight, deliveries.EndpointInFlight)
	}
}

// A burst to one slow endpoint waits for its slots, not for a timer: each attempt that ends
// wakes the next waiting job. Twelve events to an endpoint that answers after 300 ms, two at
// a time (EndpointInFlight), arrive in about six rounds of an answer and a poll; jobs that
// found no slot and waited for their own snooze (WaitAtMost, 24 s at the least) would take
// longer than the whole bound. The endpoint's bound is a setting: at 3, three attempts are
// in flight at once, and never more.
func TestWaitingDeliveriesRunWhenASlotFrees(t *testing.T) {
	for _, c := range []struct {
		name     string
		inFlight deliveries.InFlight
		cap      int
	}{
		{"default", deliveries.InFlight{}, deliveries.EndpointInFlight},
		{"three", deliveries.InFlight{Endpoint: 3}, 3},
	} {
		t.Run(c.name, func(t *testing.T) { waitingDeliveriesRun(t, c.inFlight, c.cap) })
	}
}

func waitingDeliveriesRun(t *testing.T, inFlight deliveries.InFlight, cap int) {
	t.Helper()
	f := newFixture(t)
	f.deliverer.InFlight = inFlight
	f.deliverer.Now = nil // River schedules on the wall clock
	const poll = 100 * time.Millisecond
	var mu sync.Mutex
	var now, most, got int
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		now++
		most = max(most, now)
		mu.Unlock()
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		now--
		got++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer slow.Close()
	f.deliverer.Client = deliveries.NewHTTPClient(deliveries.Policy{AllowLoopback: true}, deliveries.AttemptTimeout)
	client := f.client(t, "shop")
	f.endpoint(t, client, slow.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	workers := river.NewWorkers()
	deliveries.AddWorkers(workers, f.deliverer)
	rc, err := outbox.NewClient(f.db.DB, workers, outbox.Config{Handlers: []outbox.Handler{deliveries.Handler{InFlight: inFlight}}, PollInterval: poll,
		Queues: map[string]river.QueueConfig{deliveries.Queue: {MaxWorkers: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rc.Stop(context.Background())
	const events = 12
	start := time.Now()
	for i := range events {
		if _, err := outbox.Insert(ctx, f.db, client, outbox.OrderPaid, sql.NullInt64{}, map[string]any{"order": i}); err != nil {
			t.Fatal(err)
		}
	}
	bound := 12 * time.Second // six rounds of 300 ms and a poll, with room for a loaded machine
	for {
		mu.Lock()
		n := got
		mu.Unlock()
		if n >= events {
			break
		}
		if time.Since(start) > bound {
			t.Fatalf("%d of %d events delivered after %s", n, events, time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d events delivered in %s, at most %d at once", events, time.Since(start), most)
	if most != cap {
		t.Errorf("%d attempts at once at one endpoint; the cap is %d, and twelve waiting events reach it", most, cap)
	}
}
