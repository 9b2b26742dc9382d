package deliveries_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// fixture is a store and a deliverer on a fresh database, on the test's clock:
// deliveries, signatures and the receiver's check all read it, so that three days of
// retries pass without waiting.
type fixture struct {
	db        *sqlx.DB
	clock     *checkouttest.Clock
	store     *deliveries.Store
	deliverer *deliveries.Deliverer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	d := dbtest.New(t)
	sealer, err := deliveries.NewSealer(deliveries.NewSecretsKey())
	if err != nil {
		t.Fatal(err)
	}
	c := checkouttest.NewClock(time.Time{})
	policy := deliveries.Policy{AllowLoopback: true} // the receiver listens on 127.0.0.1
	return &fixture{
		db:    d,
		clock: c,
		store: &deliveries.Store{DB: d, Sealer: sealer, Policy: policy, Now: c.Now},
		deliverer: &deliveries.Deliverer{DB: d, Sealer: sealer, Client: deliveries.NewHTTPClient(policy, 300*time.Millisecond),
			Now: c.Now, Jitter: func() float64 { return 0.5 }},
	}
}

func (f *fixture) client(t *testing.T, name string) int64 {
	t.Helper()
	return checkouttest.ClientRow(t, f.db, name)
}

func (f *fixture) endpoint(t *testing.T, client int64, url string, types ...string) deliveries.Endpoint {
	t.Helper()
	if len(types) == 0 {
		types = []string{"order.paid"}
	}
	e, err := f.store.Create(context.Background(), client, deliveries.EndpointInput{URL: url, EventTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// event fans out a new event of the client now, as the outbox does in its transaction.
func (f *fixture) event(t *testing.T, client int64, typ string, n int) outbox.Event {
	t.Helper()
	ev := outbox.Event{ID: fmt.Sprintf("evt_%032x", time.Now().UnixNano()+int64(n)), Type: typ, ClientID: client,
		CreatedAt: f.clock.Now(), Payload: []byte(fmt.Sprintf(`{"order":"ord_%032d"}`, n))}
	tx, err := f.db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := deliveries.CreateDeliveries(context.Background(), tx, ev); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ev
}

// drive does what the job queue does, on the test's clock: every due pending delivery is
// attempted, then the clock jumps to the next one due, until none is pending. It returns
// the number of attempts made.
func (f *fixture) drive(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	attempts := 0
	for range 10000 {
		var due []int64
		if err := f.db.Select(&due, `SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY id`, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		for _, id := range due {
			if _, err := f.deliverer.Attempt(ctx, id, false); err != nil {
				t.Fatal(err)
			}
			attempts++
		}
		var next sql.NullTime
		if err := f.db.Get(&next, `SELECT min(next_attempt_at) FROM webhook_deliveries WHERE state = 'pending'`); err != nil {
			t.Fatal(err)
		}
		if !next.Valid {
			return attempts
		}
		f.clock.Forward(next.Time)
	}
	t.Fatal("deliveries still pending after 10000 rounds")
	return 0
}

// receiver is a merchant's webhook handler as docs/webhooks-out.md tells merchants to
// write it: checkout/stdwebhook verifies the signature, and Receive applies each webhook-id
// once in the merchant's own Postgres. behave decides, per request (n counts the requests
// of one webhook-id from 1), what the endpoint does besides.
type receiver struct {
	srv      *httptest.Server
	db       *sqlx.DB // the merchant's database
	mu       sync.Mutex
	requests map[string][]request // by webhook-id
	refused  int                  // requests whose signature did not verify
	keys     []stdwebhook.Key
	now      func() time.Time // the clock signatures are checked against
}

type request struct {
	body      string
	signature string
	outcome   string
}

type behaviour func(id string, n int) string

const (
	fail    = "fail"    // 500 before applying
	hang    = "hang"    // no answer past tekrar's timeout, nothing applied
	slowDup = "slowdup" // applies, then answers after tekrar gave up: tekrar retries
	slow    = "slow"    // applies, answers late but within the timeout
	ok      = "ok"
)

func newReceiver(t *testing.T, c *checkouttest.Clock, behave behaviour) *receiver {
	t.Helper()
	r := &receiver{db: dbtest.New(t), requests: map[string][]request{}, now: c.Now}
	for _, s := range []string{stdwebhook.ReceiptsTable, `CREATE TABLE applied (event_id text PRIMARY KEY, body text NOT NULL)`} {
		if _, err := r.db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		keys, now := r.keys, r.now
		r.mu.Unlock()
		msg, err := stdwebhook.Verifier{Keys: keys, Now: now}.Verify(req.Header, body)
		if err != nil {
			r.mu.Lock()
			r.refused++
			r.mu.Unlock()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		n := len(r.requests[msg.ID]) + 1
		mode := behave(msg.ID, n)
		r.requests[msg.ID] = append(r.requests[msg.ID], request{string(body), req.Header.Get(stdwebhook.HeaderSignature), mode})
		r.mu.Unlock()
		switch mode {
		case fail:
			http.Error(w, "the merchant's service is down", http.StatusInternalServerError)
			return
		case hang:
			<-req.Context().Done() // tekrar's client gives up and closes the connection
			return
		}
		_, err = stdwebhook.Receive(req.Context(), r.db.DB, msg, func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO applied (event_id, body) VALUES ($1, $2)`, msg.ID, string(body))
			return err // a second apply of one id fails here
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		switch mode {
		case slowDup:
			<-req.Context().Done()
			return
		case slow:
			time.Sleep(50 * time.Millisecond)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// got returns the requests received under a webhook-id.
func (r *receiver) got(id string) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[id]
}

// counts returns how many webhook-ids were received and how many requests were refused.
func (r *receiver) counts() (ids, refused int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests), r.refused
}

func (r *receiver) trust(t *testing.T, secrets ...string) {
	t.Helper()
	var keys []stdwebhook.Key
	for _, s := range secrets {
		k, err := stdwebhook.ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	r.mu.Lock()
	r.keys = keys
	r.mu.Unlock()
}
