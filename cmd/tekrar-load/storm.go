package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// paced is an open-loop stream of requests: request i is due at start + i/rate, whatever
// became of the ones before, and its latency is counted from when it was due, not from when
// a connection was free to send it. A closed loop (measure's) sends the next request only
// when the last is answered, so a server that stalls lowers the load offered to it and the
// requests it would have delayed are never sent: its p99 leaves out the very waits it should
// show (coordinated omission). Here a stall makes every request due meanwhile wait, and each
// counts its wait.
type paced struct {
	rate  float64 // requests a second
	conns int     // connections that send them; a request due when all are busy waits for one
	// send sends request i on c.
	send func(c *conn, i int64) (reply, error)
	// replay: an answer must be a replay (Idempotent-Replayed), or it counts as an error.
	replay bool
}

// sample is one paced request: when it was due, how long after that its answer came, and
// its status (0: no answer, -1: not a replay when one was wanted).
type sample struct {
	due    time.Time
	lat    time.Duration
	status int
}

// run sends the requests due in [start, end) and returns one sample each, in no order. A
// request due before end is sent even when that is after end; one still unsent when ctx
// ends is a sample with status 0 and the wait until then, so that a server that stops
// answering cannot look fast.
func (p paced) run(ctx context.Context, target conn, start, end time.Time) []sample {
	every := time.Duration(float64(time.Second) / p.rate)
	due := int64((end.Sub(start) + every - 1) / every)
	var seq atomic.Int64
	var mu sync.Mutex
	var out []sample
	var wg sync.WaitGroup
	for w := 0; w < p.conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := target
			defer c.close()
			var mine []sample
			for ctx.Err() == nil {
				i := seq.Add(1) - 1
				if i >= due {
					break
				}
				at := start.Add(time.Duration(i) * every)
				if wait := time.Until(at); wait > 0 {
					t := time.NewTimer(wait)
					select {
					case <-t.C:
					case <-ctx.Done():
						t.Stop()
					}
				}
				s := sample{due: at}
				if ctx.Err() == nil {
					rep, err := p.send(&c, i)
					switch {
					case err != nil:
					case rep.status < 300 && p.replay && !rep.replayed:
						s.status = -1
					default:
						s.status = rep.status
					}
				}
				s.lat = time.Since(at)
				mine = append(mine, s)
			}
			mu.Lock()
			out = append(out, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Requests no connection took before ctx ended.
	for i := seq.Load(); i < due; i++ {
		at := start.Add(time.Duration(i) * every)
		out = append(out, sample{due: at, lat: time.Since(at)})
	}
	return out
}

// window is the result of the samples due in [from, to): their latencies and errors.
func window(samples []sample, from, to time.Time) result {
	res := result{statuses: map[int]int{}}
	for _, s := range samples {
		if s.due.Before(from) || !s.due.Before(to) {
			continue
		}
		res.lat = append(res.lat, s.lat)
		if end := s.due.Add(s.lat); end.After(res.last) {
			res.last = end
		}
		res.statuses[s.status]++
		if s.status <= 0 || s.status >= 300 {
			res.errors++
		}
	}
	return res
}

// stormConfig is what storm mode measures: first arrivals at firstRate from firstConns
// connections through a warm-up, a quiet window and then a storm window of the same
// length, in which replays of keys seeded beforehand arrive at stormRate from stormConns
// other connections.
type stormConfig struct {
	firstRate, stormRate   float64
	firstConns, stormConns int
	warm, window           time.Duration
}

// stormResult is a storm run's three measurements.
type stormResult struct {
	quiet, storm result // first arrivals without and with the replays
	replays      result
	cfg          stormConfig
	stormFrom    time.Time // when the storm window began
}

// storm runs the warm-up, the quiet window and the storm window. first sends first arrival
// i; replay sends replay i (of a seeded key the caller picks). The first arrivals' schedule
// runs unbroken through all three windows, so that the storm starts in the middle of it,
// as one would; a first arrival belongs to the window it was due in.
func storm(target conn, cfg stormConfig, first, replay func(c *conn, i int64) (reply, error)) stormResult {
	start := time.Now().Add(50 * time.Millisecond)
	quietFrom := start.Add(cfg.warm)
	stormFrom := quietFrom.Add(cfg.window)
	end := stormFrom.Add(cfg.window)
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(30*time.Second))
	defer cancel()
	var firsts, replays []sample
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		firsts = paced{rate: cfg.firstRate, conns: cfg.firstConns, send: first}.run(ctx, target, start, end)
	}()
	go func() {
		defer wg.Done()
		replays = paced{rate: cfg.stormRate, conns: cfg.stormConns, send: replay, replay: true}.run(ctx, target, stormFrom, end)
	}()
	wg.Wait()
	return stormResult{quiet: window(firsts, quietFrom, stormFrom), storm: window(firsts, stormFrom, end),
		replays: window(replays, stormFrom, end), cfg: cfg, stormFrom: stormFrom}
}

// line is storm mode's one line of output:
//
//	storm first_rate=<r> quiet_p50_ms=<> quiet_p99_ms=<> storm_p50_ms=<> storm_p99_ms=<> p99_ratio=<>
//	      replay_offered=<r> replay_rps=<r> replay_p99_ms=<> first_errors=<n> replay_errors=<n>
//
// p99_ratio is storm_p99 / quiet_p99 (the bound: 1.5); replay_rps is the replays
// answered a second from the storm's start to the last answer, which falls short of
// replay_offered when the server cannot keep up (the requests due then wait, and are
// answered after the window).
func (r stormResult) line() string {
	for _, x := range []*result{&r.quiet, &r.storm, &r.replays} {
		slices.Sort(x.lat)
	}
	qp, sp := percentile(r.quiet.lat, 0.99), percentile(r.storm.lat, 0.99)
	ratio := 0.0
	if qp > 0 {
		ratio = float64(sp) / float64(qp)
	}
	answered := len(r.replays.lat) - r.replays.errors
	took := max(r.replays.last.Sub(r.stormFrom), r.cfg.window)
	return fmt.Sprintf("storm first_rate=%.0f quiet_p50_ms=%.2f quiet_p99_ms=%.2f storm_p50_ms=%.2f storm_p99_ms=%.2f p99_ratio=%.2f "+
		"replay_offered=%.0f replay_rps=%.0f replay_p99_ms=%.2f first_errors=%d replay_errors=%d",
		r.cfg.firstRate, ms(percentile(r.quiet.lat, 0.50)), ms(qp), ms(percentile(r.storm.lat, 0.50)), ms(sp), ratio,
		r.cfg.stormRate, float64(answered)/took.Seconds(), ms(percentile(r.replays.lat, 0.99)),
		r.quiet.errors+r.storm.errors, r.replays.errors)
}

// stormMain seeds the replayed keys (nkeys for each of secrets, through the SDK as replay
// mode does) unless told they exist, runs the storm and prints its line. First arrivals go
// to l's client with fresh keys; replays pick a client and one of its keys at random.
func stormMain(l *loader, cfg stormConfig, secrets []string, nkeys int, seed, seedOnly bool) error {
	if cfg.firstRate <= 0 || cfg.stormRate <= 0 || cfg.firstConns < 1 || cfg.stormConns < 1 || nkeys < 1 {
		return fmt.Errorf("-rate, -storm-rate, -c, -storm-c and -keys must be positive")
	}
	replayers := make([]*loader, len(secrets))
	for i, s := range secrets {
		r := *l
		r.secret, r.replay = s, true
		replayers[i] = &r
		if seed {
			if err := r.seed(nkeys, cfg.firstConns); err != nil {
				return fmt.Errorf("seed client %d: %w", i, err)
			}
		}
	}
	if seedOnly {
		return nil
	}
	base := 1<<40 + rand.Int64N(1<<50) // first arrivals: never a seeded key
	res := storm(l.target, cfg,
		func(c *conn, i int64) (reply, error) { return l.send(c, base+i) },
		func(c *conn, _ int64) (reply, error) {
			return replayers[rand.IntN(len(replayers))].send(c, rand.Int64N(int64(nkeys)))
		})
	fmt.Println(res.line())
	for name, r := range map[string]result{"quiet": res.quiet, "storm": res.storm, "replays": res.replays} {
		if r.errors > 0 {
			fmt.Fprintf(os.Stderr, "tekrar-load: %s statuses (0: no answer, -1: not a replay): %v\n", name, r.statuses)
		}
	}
	return nil
}
