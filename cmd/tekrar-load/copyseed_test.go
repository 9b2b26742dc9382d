package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/apptest"
)

// TestCopySeededKeysReplay: 1,000 keys seeded with COPY are each answered as a replay
// through the real app, with the seeded response (which the contract check of every
// response holds to the OpenAPI document); a seeded order reads back through GET as its
// stored answer says, so the rows are the ones a first arrival leaves; a first arrival on a
// fresh key still claims, charges and completes; and every live key's replay is measured,
// the expired keys are left to the sweeper; a second client seeded under the same run gets
// keys of its own.
func TestCopySeededKeysReplay(t *testing.T) {
	e := apptest.New(t)
	ctx := context.Background()
	db, err := sql.Open("postgres", e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := &loader{secret: e.Secret, run: "copy", replay: true}
	const live, expired = 1000, 10
	if err := seedCopyMain(l, e.DBURL, live, expired); err != nil {
		t.Fatal(err)
	}
	var keys, events, counted, pays, outbox int
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM idempotency_keys WHERE expires_at > now()),
	       (SELECT count(*) FROM key_events), (SELECT sum(n) FROM key_event_counts),
	       (SELECT count(*) FROM payments), (SELECT count(*) FROM outbox_events)`).Scan(&keys, &events, &counted, &pays, &outbox); err != nil {
		t.Fatal(err)
	}
	if keys != live || events != 2*(live+expired) || counted != events || pays != live+expired || outbox != live+expired {
		t.Fatalf("%d live keys, %d history entries (%d counted), %d payments, %d events; want %d, %d, %d, %d, %d",
			keys, events, counted, pays, outbox, live, 2*(live+expired), 2*(live+expired), live+expired, live+expired)
	}

	for n := int64(0); n < live; n++ {
		r := e.Do(t, "POST", orderPath, e.Secret, l.body(n), "Idempotency-Key", l.key(n))
		var stored []byte
		if err := db.QueryRowContext(ctx, `SELECT response_body FROM idempotency_keys WHERE client_id = $1 AND key = $2`,
			e.ClientID, l.key(n)).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, stored) {
			t.Fatalf("key %d: %d replayed=%q %s, want the seeded 201 %s", n, r.Status, r.Header.Get("Idempotent-Replayed"), r.Body, stored)
		}
		if n%250 == 0 {
			var view struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(r.Body, &view); err != nil {
				t.Fatal(err)
			}
			got := e.Do(t, "GET", orderPath+"/"+view.ID, e.Secret, nil)
			if got.Status != 200 || !jsonEqual(t, got.Body, r.Body) {
				t.Errorf("key %d: GET %s: %d %s, want the stored answer %s", n, view.ID, got.Status, got.Body, r.Body)
			}
		}
	}
	r := e.Do(t, "POST", orderPath, e.Secret, l.body(live+expired), "Idempotency-Key", l.key(live+expired))
	if r.Status != 201 || r.Header.Get("Idempotent-Replayed") == "true" {
		t.Fatalf("a fresh key: %d replayed=%q %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	// An expired seeded key is not replayed.
	r = e.Do(t, "POST", orderPath, e.Secret, l.body(live), "Idempotency-Key", l.key(live))
	if r.Header.Get("Idempotent-Replayed") == "true" {
		t.Fatalf("an expired seeded key was replayed: %d %s", r.Status, r.Body)
	}
	// Another client's keys of the same run are its own: the same key names, other orders.
	secret2, _ := e.NewClient(t, "other app")
	l2 := &loader{secret: secret2, run: "copy", replay: true}
	if err := seedCopyMain(l2, e.DBURL, 10, 0); err != nil {
		t.Fatal(err)
	}
	mine := e.Do(t, "POST", orderPath, e.Secret, l.body(3), "Idempotency-Key", l.key(3))
	theirs := e.Do(t, "POST", orderPath, secret2, l2.body(3), "Idempotency-Key", l2.key(3))
	if theirs.Status != 201 || theirs.Header.Get("Idempotent-Replayed") != "true" || bytes.Equal(theirs.Body, mine.Body) {
		t.Fatalf("the other client's key 3: %d replayed=%q %s (the first client's: %s)", theirs.Status, theirs.Header.Get("Idempotent-Replayed"), theirs.Body, mine.Body)
	}
	var exp time.Time
	if err := db.QueryRowContext(ctx, `SELECT max(expires_at) FROM idempotency_keys WHERE key = $1`, l.key(live+expired-1)).Scan(&exp); err != nil || exp.After(time.Now()) {
		t.Fatalf("the last expired key expires at %v (%v)", exp, err)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
