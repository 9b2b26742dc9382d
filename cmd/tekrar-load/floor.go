package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/lib/pq"

	tdb "github.com/tekrar/tekrar/internal/db"
)

// floor is the least Go HTTP server that does design.sql's work per request: the floor
// that bench.sh -B sets beside the ceiling. The ceiling runs design.sql's three commits as
// bare SQL from pgbench, a C client that costs next to nothing, on the two cores Postgres
// has; tekrar is measured over HTTP, from a Go load tool, with a Go server on the same two
// cores. The floor answers the load tool's first arrivals with the same three commits and
// nothing else, so its rate against design.sql's, in the same round, is what HTTP and Go
// cost on this machine, and tekrar's against the floor's is what tekrar itself costs.
//
// It is built to be the cheapest correct server: net/http, the standard library's server,
// with no framework, no middleware and no logging per request; database/sql and lib/pq with
// every statement prepared once (tx.Stmt reuses a connection's preparation) and binary
// parameters as tekrar connects (db.DSN); the ceiling's look-up before the claim, which
// tekrar also makes. It does not authenticate (design.sql does not), keeps no history and
// no events, and has no recovery: a key whose request died between its commits stays in
// progress and is answered 409, which is enough for a measurement.
type floor struct {
	db                                                    *sql.DB
	lookup, claim, order, charge, payment, paid, complete *sql.Stmt
}

// floorConfig is what floor mode needs: the database (a lib/pq URL), the schema its tables
// live in ("": the connection's default, as on the ceiling's database) and its pool size.
type floorConfig struct {
	dbURL, schema string
	maxConns      int
}

// floorMain serves floor mode on addr until SIGINT or SIGTERM, then lets the requests in
// flight finish.
func floorMain(cfg floorConfig, addr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f, err := newFloor(ctx, cfg)
	if err != nil {
		return err
	}
	defer f.close()
	srv := &http.Server{Addr: addr, Handler: f.handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe() }()
	select {
	case err := <-done:
		return fmt.Errorf("serve %s: %w", addr, err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}

// newFloor connects, creates the schema (when one is named) and the tables if they are
// missing, and prepares the statements.
func newFloor(ctx context.Context, cfg floorConfig) (_ *floor, err error) {
	dsn := cfg.dbURL
	if cfg.schema != "" {
		if dsn, err = withSearchPath(dsn, cfg.schema); err != nil {
			return nil, err
		}
	}
	db, err := sql.Open("postgres", tdb.DSN(dsn))
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	f := &floor{db: db}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	db.SetMaxOpenConns(cfg.maxConns)
	db.SetMaxIdleConns(cfg.maxConns)
	if cfg.schema != "" {
		// The connections' search_path names it already; it is looked up at each statement.
		if _, err := db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+pq.QuoteIdentifier(cfg.schema)); err != nil {
			return nil, fmt.Errorf("create schema %s: %w", cfg.schema, err)
		}
	}
	if _, err := db.ExecContext(ctx, floorSchemaSQL); err != nil {
		return nil, fmt.Errorf("create tables: %w", err)
	}
	for _, s := range []struct {
		to  **sql.Stmt
		sql string
	}{
		{&f.lookup, floorLookupSQL}, {&f.claim, floorClaimSQL}, {&f.order, floorOrderSQL}, {&f.charge, floorChargeSQL},
		{&f.payment, floorPaymentSQL}, {&f.paid, floorPaidSQL}, {&f.complete, floorCompleteSQL},
	} {
		if *s.to, err = db.PrepareContext(ctx, s.sql); err != nil {
			return nil, fmt.Errorf("prepare %q: %w", s.sql, err)
		}
	}
	return f, nil
}

// withSearchPath sets the search_path that lib/pq passes to the server when a connection
// starts, so that every connection of the pool, and every statement prepared on it, finds
// the floor's tables in schema.
func withSearchPath(dbURL, schema string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("-schema needs a postgres:// database URL, got %q", dbURL)
	}
	q := u.Query()
	q.Set("search_path", pq.QuoteIdentifier(schema))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func (f *floor) close() {
	// Closing the pool closes the statements' preparations with its connections.
	_ = f.db.Close()
}

// handler serves POST /v1/orders, and GET /readyz for a script waiting for the server: it
// listens only once the tables and the statements are ready.
func (f *floor) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/orders", f.serveOrder)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

// floorOrder is what the floor reads of the load tool's body (loader.body); the rest is
// hashed, not read.
type floorOrder struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// errKeyHeld: the claim found the key taken by another request since the look-up.
var errKeyHeld = errors.New("key claimed by another request")

func (f *floor) serveOrder(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		problem(w, http.StatusBadRequest, "Idempotency-Key header required")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		problem(w, http.StatusBadRequest, "unreadable body")
		return
	}
	var in floorOrder
	if err := json.Unmarshal(body, &in); err != nil || in.Amount <= 0 || in.Currency == "" {
		problem(w, http.StatusBadRequest, "body must be JSON with a positive amount and a currency")
		return
	}
	h := fnv.New32a()
	_, _ = io.WriteString(h, key)
	scope := "merchant-" + strconv.FormatUint(uint64(h.Sum32()%1000), 10)
	sum := sha256.Sum256(body)
	hash := sum[:]
	// A request its client gave up on still runs to its last commit: nothing here would
	// ever complete a key left in progress.
	ctx := context.WithoutCancel(r.Context())

	if ok, err := f.answerStored(ctx, w, scope, key, hash); ok || err != nil {
		if err != nil {
			fail(w, err)
		}
		return
	}
	resp, err := f.first(ctx, scope, key, hash, in)
	if errors.Is(err, errKeyHeld) {
		ok, err := f.answerStored(ctx, w, scope, key, hash)
		if err == nil && !ok {
			err = fmt.Errorf("key %q: claimed by another request, then not found", key)
		}
		if err != nil {
			fail(w, err)
		}
		return
	}
	if err != nil {
		fail(w, err)
		return
	}
	respond(w, http.StatusCreated, "application/json", resp)
}

// answerStored answers from the key's row if there is one: its stored response if it is
// completed (marked Idempotent-Replayed), 422 if it was made for another body, 409 while it
// is in progress. It reports whether it answered.
func (f *floor) answerStored(ctx context.Context, w http.ResponseWriter, scope, key string, hash []byte) (bool, error) {
	var status string
	var code sql.NullInt64
	var stored, storedHash []byte
	err := f.lookup.QueryRowContext(ctx, scope, key).Scan(&status, &code, &stored, &storedHash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up key %q: %w", key, err)
	case !bytes.Equal(storedHash, hash):
		problem(w, http.StatusUnprocessableEntity, "Idempotency-Key reused with another request body")
	case status == "completed" && code.Valid:
		w.Header().Set("Idempotent-Replayed", "true")
		respond(w, int(code.Int64), "application/json", stored)
	default:
		problem(w, http.StatusConflict, "a request with this Idempotency-Key is in progress")
	}
	return true, nil
}

// first runs design.sql's three commits for a new key and returns the stored response.
func (f *floor) first(ctx context.Context, scope, key string, hash []byte, in floorOrder) ([]byte, error) {
	keyID, orderID, err := f.claimKey(ctx, scope, key, hash, in)
	if err != nil {
		return nil, err
	}
	var chargeID int64
	if err := f.charge.QueryRowContext(ctx, keyID, in.Amount, in.Currency).Scan(&chargeID); err != nil {
		// No row: the provider holds a charge under this key already, which only a request
		// that died after its charge leaves, and its key is still in progress.
		return nil, fmt.Errorf("charge key %d: %w", keyID, err)
	}
	return f.completeKey(ctx, keyID, orderID, chargeID, in)
}

// claimKey is commit 1: the key in progress and the order pending. errKeyHeld if another
// request claimed the key first.
func (f *floor) claimKey(ctx context.Context, scope, key string, hash []byte, in floorOrder) (keyID, orderID int64, err error) {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("claim: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op
	err = tx.StmtContext(ctx, f.claim).QueryRowContext(ctx, scope, key, hash).Scan(&keyID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, errKeyHeld
	}
	if err != nil {
		return 0, 0, fmt.Errorf("claim key %q: %w", key, err)
	}
	if err := tx.StmtContext(ctx, f.order).QueryRowContext(ctx, scope, in.Amount, in.Currency).Scan(&orderID); err != nil {
		return 0, 0, fmt.Errorf("create order of key %d: %w", keyID, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("claim: commit key %d: %w", keyID, err)
	}
	return keyID, orderID, nil
}

// completeKey is commit 3: the payment, the order paid and the key completed with the
// response it returns.
func (f *floor) completeKey(ctx context.Context, keyID, orderID, chargeID int64, in floorOrder) ([]byte, error) {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("complete: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.StmtContext(ctx, f.payment).ExecContext(ctx, orderID, chargeID, in.Amount); err != nil {
		return nil, fmt.Errorf("record payment of order %d: %w", orderID, err)
	}
	if _, err := tx.StmtContext(ctx, f.paid).ExecContext(ctx, orderID); err != nil {
		return nil, fmt.Errorf("mark order %d paid: %w", orderID, err)
	}
	var resp []byte
	if err := tx.StmtContext(ctx, f.complete).QueryRowContext(ctx, keyID, orderID, in.Amount, in.Currency).Scan(&resp); err != nil {
		return nil, fmt.Errorf("complete key %d: %w", keyID, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("complete: commit key %d: %w", keyID, err)
	}
	return resp, nil
}

// respond writes a whole answer with its Content-Length, which the load tool's parser
// (conn.go) needs.
func respond(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// problem answers with an RFC 9457 problem document.
func problem(w http.ResponseWriter, status int, detail string) {
	b, _ := json.Marshal(struct {
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{http.StatusText(status), status, detail})
	respond(w, status, "application/problem+json", b)
}

// fail answers 500 and logs why: the floor logs nothing else.
func fail(w http.ResponseWriter, err error) {
	log.Printf("tekrar-load: floor: %v", err)
	problem(w, http.StatusInternalServerError, "internal error")
}
