// Command tekrar-load drives a running tekrar over HTTP and reports throughput and latency,
// so that speed claims come from a measurement beside the database ceiling, not from a
// timed test.
//
//	tekrar-load -url http://127.0.0.1:8080 -secret $SECRET -mode first  -c 16 -d 10s
//	tekrar-load -url http://127.0.0.1:8080 -secret $SECRET -mode replay -c 16 -d 10s -keys 10000
//
// first: every request is a new intent (a fresh key): claim, charge, complete.
// replay: keys are created first, then requests repeat them at random: the replay path.
// It prints one line: "load <mode> clients=<c> requests=<n> rps=<r> p50_ms=<> p99_ms=<> errors=<n>".
// In replay mode an answer that is not marked Idempotent-Replayed counts as an error.
// Each client keeps one keep-alive connection (see conn.go for why it is not net/http's).
// The replay keys are seeded through tekrar's Go SDK (checkout/sdk), which retries what
// a loaded server answers with 503s or loses; only the measured requests use conn.go.
//
//	tekrar-load -url ... -secret $SECRET -mode storm -rate 50 -c 16 -storm-c 64 -d 10s -keys 1000 -storm-secrets $S1,$S2
//
// storm: first arrivals at a fixed rate (open loop: -rate a second whatever the server's
// speed, latency counted from each request's due time) through a quiet window of -d and then
// a storm window of -d, in which replays of keys seeded first (-keys per client of
// -storm-secrets) arrive at -storm-rate (10 times -rate by default) from -storm-c other
// connections, as tills resending their queues after an outage. It prints one line with the
// first arrivals' p50 and p99 quiet and in the storm, their ratio, and the replays' rate and
// p99 (storm.go).
//
//	tekrar-load -secret $SECRET -mode seed-copy -database-url $DATABASE_URL -run growth -keys 10000000 -expired 100000
//
// seed-copy: the keys that replay mode repeats (-run, -keys), written straight into tekrar's
// database with COPY, each with its order, payment, key history and event (copyseed.go),
// live for most of the client's key TTL; -expired more keys after them that expired over the
// last three hours, for the sweeper to remove. Replay mode then runs with -no-seed.
//
//	tekrar-load -mode pgbench-log FILE...
//
// pgbench-log: the same percentiles of a pgbench run's per-transaction logs (pgbench -l), the
// ceiling's p99 that bench.sh sets beside tekrar's (pgbenchlog.go).
//
//	tekrar-load -mode floor -database-url $DATABASE_URL -addr 127.0.0.1:8090 [-schema NAME] [-max-conns 32]
//
// floor: not a load but a server, until SIGINT or SIGTERM: the least Go HTTP server that
// answers first mode's requests with design.sql's three commits (the ceiling's tables, made
// if missing, in -schema if one is named), the floor that bench.sh -B measures beside
// tekrar and the ceiling (floor.go).
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tekrar/tekrar/checkout/sdk"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "tekrar base URL")
	secret := flag.String("secret", os.Getenv("TEKRAR_SECRET"), "client secret (or TEKRAR_SECRET)")
	mode := flag.String("mode", "first", "first, replay, storm, seed-copy, pgbench-log or floor")
	clients := flag.Int("c", 16, "concurrent clients")
	dur := flag.Duration("d", 10*time.Second, "how long to measure")
	warm := flag.Duration("warmup", 2*time.Second, "load before measuring")
	nkeys := flag.Int("keys", 10000, "replay: how many keys to create and then repeat")
	run := flag.String("run", fmt.Sprintf("%x", rand.Uint64()), "key prefix; reuse one to replay keys created by an earlier run")
	seedOnly := flag.Bool("seed-only", false, "replay: create the keys and exit")
	noSeed := flag.Bool("no-seed", false, "replay: the keys exist already (same -run and -keys)")
	rate := flag.Float64("rate", 50, "storm: first arrivals a second, sent open loop from -c connections")
	stormRate := flag.Float64("storm-rate", 0, "storm: replays a second during the storm (0: 10 times -rate)")
	recent := flag.Int("recent", 0, "replay: repeat only the last this many of the -keys keys (the newest, as retries do); 0: all of them")
	stormConns := flag.Int("storm-c", 64, "storm: connections that send the replays")
	dbURL := flag.String("database-url", os.Getenv("DATABASE_URL"), "seed-copy: tekrar's database; floor: the ceiling's (or DATABASE_URL)")
	addr := flag.String("addr", "127.0.0.1:8090", "floor: the address to serve on")
	schema := flag.String("schema", "", "floor: the schema of its tables, created if missing (default: the connection's search_path)")
	maxConns := flag.Int("max-conns", 32, "floor: database connections")
	expired := flag.Int("expired", 0, "seed-copy: also this many expired keys after the -keys live ones, for the sweeper")
	stormSecrets := flag.String("storm-secrets", "", "storm: comma-separated secrets of the clients whose keys are replayed, -keys each (default: -secret)")
	flag.Parse()
	if *mode == "pgbench-log" {
		if err := pgbenchLogMain(flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "tekrar-load: pgbench log:", err)
			os.Exit(1)
		}
		return
	}
	if *mode == "floor" {
		if *dbURL == "" || *maxConns < 1 {
			flag.Usage()
			os.Exit(2)
		}
		if err := floorMain(floorConfig{dbURL: *dbURL, schema: *schema, maxConns: *maxConns}, *addr); err != nil {
			fmt.Fprintln(os.Stderr, "tekrar-load: floor:", err)
			os.Exit(1)
		}
		return
	}
	if *secret == "" || (*mode != "first" && *mode != "replay" && *mode != "storm" && *mode != "seed-copy") {
		flag.Usage()
		os.Exit(2)
	}
	target, err := newConn(*url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tekrar-load:", err)
		os.Exit(2)
	}
	l := &loader{target: *target, url: *url, secret: *secret, run: *run, replay: *mode == "replay"}
	if *mode == "seed-copy" {
		if err := seedCopyMain(l, *dbURL, *nkeys, *expired); err != nil {
			fmt.Fprintln(os.Stderr, "tekrar-load: seed-copy:", err)
			os.Exit(1)
		}
		return
	}
	if *mode == "storm" {
		if *stormRate == 0 {
			*stormRate = 10 * *rate
		}
		cfg := stormConfig{firstRate: *rate, stormRate: *stormRate, firstConns: *clients, stormConns: *stormConns,
			warm: *warm, window: *dur}
		if err := stormMain(l, cfg, strings.Split(cmp.Or(*stormSecrets, *secret), ","), *nkeys, !*noSeed, *seedOnly); err != nil {
			fmt.Fprintln(os.Stderr, "tekrar-load: storm:", err)
			os.Exit(1)
		}
		return
	}
	var next func(worker int) int64
	// First-time keys are numbered from a random point, so that runs sharing -run do not
	// meet each other's keys.
	if *mode == "replay" {
		if !*noSeed {
			if err := l.seed(*nkeys, *clients); err != nil {
				fmt.Fprintln(os.Stderr, "tekrar-load: seed:", err)
				os.Exit(1)
			}
		}
		if *seedOnly {
			return
		}
		from := 0
		if *recent > 0 && *recent < *nkeys {
			from = *nkeys - *recent
		}
		next = func(int) int64 { return int64(from) + rand.Int64N(int64(*nkeys-from)) }
	} else {
		var seq atomic.Int64
		seq.Store(1<<40 + rand.Int64N(1<<50)) // never meets a seeded key
		next = func(int) int64 { return seq.Add(1) }
	}
	res := l.measure(*clients, *warm, *dur, next)
	fmt.Println(res.line(*mode, *clients, *dur))
	if res.errors > 0 {
		fmt.Fprintln(os.Stderr, "tekrar-load: statuses (0: no answer, -1: not a replay):", res.statuses)
	}
}

type loader struct {
	target           conn // where to send, not connected: each worker gets its own copy
	url, secret, run string
	replay           bool // every answer must be a replay
}

// key is the Idempotency-Key of intent n.
func (l *loader) key(n int64) string { return fmt.Sprintf("load-%s-%d", l.run, n) }

// order is intent n as the seeding client sends it: the same JSON, byte for byte, as body(n)
// (TestSeedBodyIsTheMeasuredBody), so that the measured requests replay the seeded keys.
func (l *loader) order(n int64) sdk.OrderInput {
	amount := 100 + n%100000
	return sdk.OrderInput{Currency: "TRY", Amount: amount,
		Items:    []sdk.Item{{SKU: "LATTE", Name: "Latte", Quantity: 1, UnitAmount: amount}},
		Payment:  sdk.Payment{CardToken: "tok_visa"},
		Customer: &sdk.Customer{ID: fmt.Sprintf("cus_%d", n%1000)}}
}

// body is the same for a key on every send, so that repeats are replays. It is written by
// hand rather than encoded, to keep the measured loop cheap.
func (l *loader) body(n int64) []byte {
	amount := 100 + n%100000
	return fmt.Appendf(nil, `{"currency":"TRY","items":[{"sku":"LATTE","name":"Latte","quantity":1,"unit_amount":%d}],"amount":%d,"payment":{"card_token":"tok_visa"},"customer":{"id":"cus_%d"}}`,
		amount, amount, n%1000)
}

// send posts the order of key n on the worker's connection.
func (l *loader) send(c *conn, n int64) (reply, error) {
	return c.post(l.secret, l.key(n), l.body(n))
}

// worker is one client's connection.
func (l *loader) worker() *conn {
	c := l.target
	return &c
}

// seed creates the keys that replay mode repeats, workers at a time, through the Go SDK:
// a seed that meets a lost answer or a retryable problem retries it under the same key.
func (l *loader) seed(n, workers int) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = workers
	c := sdk.New(l.url, l.secret, sdk.WithHTTPClient(&http.Client{Transport: tr}))
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, _, err := c.CreateOrder(context.Background(), l.key(i), l.order(i)); err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("key %d: %w", i, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return nil
}

type result struct {
	lat      []time.Duration
	errors   int
	statuses map[int]int
	last     time.Time // paced requests (window): when the last answer came
}

func (l *loader) measure(workers int, warm, dur time.Duration, next func(int) int64) result {
	ctx, cancel := context.WithTimeout(context.Background(), warm+dur)
	defer cancel()
	measureFrom := time.Now().Add(warm)
	var mu sync.Mutex
	res := result{statuses: map[int]int{}}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := l.worker()
			defer c.close()
			var lat []time.Duration
			st := map[int]int{}
			errs := 0
			for ctx.Err() == nil {
				t0 := time.Now()
				rep, err := l.send(c, next(w))
				d := time.Since(t0)
				if ctx.Err() != nil || t0.Before(measureFrom) {
					continue
				}
				lat = append(lat, d)
				switch {
				case err != nil:
					errs++
					st[0]++
				case rep.status < 300 && l.replay && !rep.replayed:
					errs++
					st[-1]++
				default:
					st[rep.status]++
					if rep.status >= 300 {
						errs++
					}
				}
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.errors += errs
			for k, v := range st {
				res.statuses[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return res
}

func (r result) line(mode string, clients int, dur time.Duration) string {
	slices.Sort(r.lat)
	return fmt.Sprintf("load %s clients=%d requests=%d rps=%.0f p50_ms=%.2f p99_ms=%.2f errors=%d",
		mode, clients, len(r.lat), float64(len(r.lat))/dur.Seconds(), ms(percentile(r.lat, 0.50)), ms(percentile(r.lat, 0.99)), r.errors)
}
