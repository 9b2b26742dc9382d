package report

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// The overview's counts come from key_event_counts for whole minutes and from key_events
// for the edges. Whatever the window, they must equal a plain count of the events, also
// after events were deleted, and concurrent writers must neither lose counts nor deadlock.
func TestEventCountsMatchTheEvents(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	var clients [3]int64
	for i := range clients {
		clients[i] = checkouttest.ClientRow(t, d, fmt.Sprint("counts ", i))
	}
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	span := 6 * time.Hour

	// Eight writers at once, each inserting batches of events at random instants (to the
	// microsecond) of the same few hours, as several serve processes do.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 20 {
				batch := make([]countedEvent, 50)
				for i := range batch {
					// Some on the minute, where a window's whole minutes and edges meet.
					batch[i] = countedEvent{
						At:       t0.Add(time.Duration(rng.Int64N(int64(span/time.Microsecond))) * time.Microsecond),
						ClientID: clients[rng.IntN(len(clients))],
						Key:      fmt.Sprint("k", rng.IntN(100)),
						Kind:     EventKinds[rng.IntN(len(EventKinds))],
					}
					if i%5 == 0 {
						batch[i].At = batch[i].At.Truncate(time.Minute)
					}
				}
				if err := insertEventBatch(d, batch); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent event batches: %v", err)
	}

	check := func(t *testing.T, label string) {
		t.Helper()
		rng := rand.New(rand.NewPCG(1, 2))
		windows := [][2]time.Time{{t0, t0.Add(span)}, {t0.Add(-time.Hour), t0.Add(span + time.Hour)},
			{t0.Add(90 * time.Second), t0.Add(90*time.Second + 30*time.Second)}, {t0.Add(time.Minute), t0.Add(3 * time.Minute)}}
		for range 40 {
			a := t0.Add(time.Duration(rng.Int64N(int64(span))))
			b := a.Add(time.Duration(1 + rng.Int64N(int64(span))))
			if rng.IntN(2) == 0 {
				a, b = a.Truncate(time.Minute), b.Truncate(time.Minute).Add(time.Minute)
			}
			windows = append(windows, [2]time.Time{a, b})
		}
		for _, w := range windows {
			for _, client := range []int64{0, clients[1]} {
				got, err := HistoryCounts(ctx, d, w[0], w[1], client)
				if err != nil {
					t.Fatal(err)
				}
				want := plainCounts(t, d, w[0], w[1], client)
				for _, k := range EventKinds {
					if got[k] != want[k] {
						t.Fatalf("%s: HistoryCounts(%s, %s, client %d)[%s] = %d, a count of the events says %d",
							label, w[0].Format(time.RFC3339Nano), w[1].Format(time.RFC3339Nano), client, k, got[k], want[k])
					}
				}
			}
			for _, buckets := range []int{1, 7, 24} {
				rate, err := ReplayRate(ctx, d, w[0], w[1], buckets)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rate {
					want := plainCounts(t, d, r.Start, r.End, 0)
					if r.Start.Before(r.End) && (r.Created != want[checkout.KindCreated] || r.Replayed != want[checkout.KindReplayed]) {
						t.Fatalf("%s: ReplayRate bucket [%s, %s) = %d/%d, a count says %d/%d", label,
							r.Start.Format(time.RFC3339Nano), r.End.Format(time.RFC3339Nano), r.Created, r.Replayed,
							want[checkout.KindCreated], want[checkout.KindReplayed])
					}
				}
			}
		}
	}
	check(t, "after concurrent inserts")

	// The retention's deletes, and a fixture's, take their events out of the counts.
	if _, err := d.Exec(`DELETE FROM key_events WHERE id % 3 = 0 OR at < $1`, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check(t, "after deletes")
	var stale int
	if err := d.Get(&stale, `SELECT count(*) FROM key_event_counts WHERE n = 0`); err != nil || stale != 0 {
		t.Fatalf("%d empty count rows left (%v)", stale, err)
	}
}

// plainCounts counts events of each kind in [from, to) the slow way.
func plainCounts(t *testing.T, d *sqlx.DB, from, to time.Time, client int64) map[string]int64 {
	t.Helper()
	var rows []struct {
		Kind string `db:"kind"`
		N    int64  `db:"n"`
	}
	if err := d.Select(&rows, `SELECT kind, count(*) AS n FROM key_events
		WHERE at >= $1 AND at < $2 AND ($3 = 0 OR client_id = $3) GROUP BY kind`, from, to, client); err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, r := range rows {
		m[r.Kind] = r.N
	}
	return m
}

// countedEvent is what the counts are kept by: the instant, the client and the kind.
type countedEvent struct {
	At       time.Time
	ClientID int64
	Key      string
	Kind     string
}

// insertEventBatch writes a batch as checkout's event log does: one INSERT of all its rows
// from arrays, in a transaction of its own, so that the counting trigger sees the batch as
// one statement.
func insertEventBatch(d *sqlx.DB, batch []countedEvent) error {
	at := make([]string, len(batch))
	client := make([]int64, len(batch))
	key := make([]string, len(batch))
	kind := make([]string, len(batch))
	for i, e := range batch {
		at[i] = e.At.UTC().Format(time.RFC3339Nano)
		client[i], key[i], kind[i] = e.ClientID, e.Key, e.Kind
	}
	tx, err := d.Beginx()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`
		INSERT INTO key_events (at, client_id, key, kind)
		SELECT * FROM unnest($1::timestamptz[], $2::bigint[], $3::text[], $4::text[])`,
		pq.Array(at), pq.Array(client), pq.Array(key), pq.Array(kind)); err != nil {
		return fmt.Errorf("insert %d events: %w", len(batch), err)
	}
	return tx.Commit()
}
