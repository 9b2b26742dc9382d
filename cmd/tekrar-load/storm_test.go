package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer answers every order with 201, at once but for the first stalled requests,
// which it holds for stall; keys that start with "replay" are answered as replays.
func fakeServer(t *testing.T, stalled int64, stall time.Duration) (conn, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= stalled {
			time.Sleep(stall)
		}
		if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "replay") {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	c, err := newConn(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return *c, &n
}

// TestPacedCountsFromTheDueTime: one connection, a request due every 10 ms, a server that
// holds the first request 300 ms. The requests due during the stall are sent late, and each
// counts its wait from when it was due (a closed loop would have sent none of them, and
// timed the one after the stall from its sending); none is dropped.
func TestPacedCountsFromTheDueTime(t *testing.T) {
	target, served := fakeServer(t, 1, 300*time.Millisecond)
	l := &loader{secret: "s", run: "paced"}
	start := time.Now().Add(20 * time.Millisecond)
	p := paced{rate: 100, conns: 1, send: l.send}
	samples := p.run(context.Background(), target, start, start.Add(500*time.Millisecond))
	if len(samples) != 50 || served.Load() != 50 {
		t.Fatalf("%d samples, %d requests served, want 50 of each", len(samples), served.Load())
	}
	for _, s := range samples {
		if s.status != 201 {
			t.Errorf("due at %v: status %d", s.due.Sub(start), s.status)
		}
		// Request i was due i*10 ms in and could not be sent before the stall ended, 300 ms
		// in: it waited at least the difference (less a little for the timer's slack).
		if in := s.due.Sub(start); in < 280*time.Millisecond {
			if least := 300*time.Millisecond - in - 10*time.Millisecond; s.lat < least {
				t.Errorf("due at %v: latency %v, want at least %v", in, s.lat, least)
			}
		}
	}
}

// TestPacedCountsWhatWasNeverSent: a server that does not answer before the run ends
// still gets a sample for every request that was due, an error for each it never got.
func TestPacedCountsWhatWasNeverSent(t *testing.T) {
	target, _ := fakeServer(t, 1000, 500*time.Millisecond)
	l := &loader{secret: "s", run: "never"}
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(300*time.Millisecond))
	defer cancel()
	samples := paced{rate: 100, conns: 1, send: l.send}.run(ctx, target, start, start.Add(200*time.Millisecond))
	res := window(samples, start, start.Add(200*time.Millisecond))
	if len(res.lat) != 20 || res.errors != 19 || res.statuses[201] != 1 {
		t.Fatalf("%d samples, %d errors (%v), want 20: one answered, 19 never sent", len(res.lat), res.errors, res.statuses)
	}
	for _, s := range samples {
		if s.status == 0 && s.lat < 300*time.Millisecond-s.due.Sub(start) {
			t.Errorf("due at %v, never sent: latency %v, want its wait until the run ended", s.due.Sub(start), s.lat)
		}
	}
}

// TestStormWindows: the first arrivals of each window and the storm's replays are the
// requests due in it, whatever the server's speed; replays answered as such are no errors.
func TestStormWindows(t *testing.T) {
	target, _ := fakeServer(t, 0, 0)
	first := &loader{secret: "s", run: "first"}
	cfg := stormConfig{firstRate: 100, stormRate: 1000, firstConns: 4, stormConns: 8,
		warm: 100 * time.Millisecond, window: 300 * time.Millisecond}
	res := storm(target, cfg, first.send, func(c *conn, i int64) (reply, error) {
		return c.post("s", "replay-1", []byte("{}"))
	})
	if len(res.quiet.lat) != 30 || len(res.storm.lat) != 30 || len(res.replays.lat) != 300 {
		t.Fatalf("quiet %d, storm %d, replays %d requests; want 30, 30, 300", len(res.quiet.lat), len(res.storm.lat), len(res.replays.lat))
	}
	if res.quiet.errors+res.storm.errors+res.replays.errors != 0 {
		t.Fatalf("errors: %v %v %v", res.quiet.statuses, res.storm.statuses, res.replays.statuses)
	}
	if line := res.line(); !strings.HasPrefix(line, "storm first_rate=100 ") || !strings.Contains(line, " replay_offered=1000 ") {
		t.Errorf("line: %s", line)
	}
}

// TestStormReplayRateIsWhatWasAnswered: replays offered at 100 a second for a 1-second window
// but answered over 2 seconds ran at 50 a second, not at the rate offered.
func TestStormReplayRateIsWhatWasAnswered(t *testing.T) {
	from := time.Now()
	var samples []sample
	for i := range 100 {
		due := from.Add(time.Duration(i) * 10 * time.Millisecond)
		// The server answers one every 20 ms from the start: request i at (i+1)*20 ms.
		samples = append(samples, sample{due: due, lat: from.Add(time.Duration(i+1) * 20 * time.Millisecond).Sub(due), status: 201})
	}
	r := stormResult{cfg: stormConfig{firstRate: 10, stormRate: 100, window: time.Second}, stormFrom: from,
		replays: window(samples, from, from.Add(time.Second))}
	if line := r.line(); !strings.Contains(line, " replay_offered=100 replay_rps=50 replay_p99_ms=1000.00 ") {
		t.Errorf("line: %s", line)
	}
}
