package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// writer inserts notes through the several-host URL, a new connection each, from a few
// goroutines until stopped, and remembers those whose INSERT was acknowledged: under
// synchronous replication every one of them must survive any failover. An INSERT has no
// deadline: lib/pq cancels a statement whose context ends, and a COMMIT cancelled while it
// waits for the synchronous standby is reported as done though it was committed on the
// primary alone (a write stuck on a frozen leader would then count as acknowledged and be
// lost by the rewind, a fault of the client, not of the cluster). A stuck INSERT ends when
// its node is demoted, with an error.
type writer struct {
	mu    sync.Mutex
	next  int
	acked []string
	tried int
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startWriter(t *testing.T, c *Cluster) *writer {
	t.Helper()
	db := open(t, c.URL(Database))
	db.SetMaxIdleConns(0) // a new connection each time finds the primary anew
	w := &writer{stop: make(chan struct{})}
	for range 4 {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for {
				select {
				case <-w.stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				w.mu.Lock()
				note := "w" + strconv.Itoa(w.next)
				w.next++
				w.mu.Unlock()
				_, err := db.Exec(`INSERT INTO notes (note) VALUES ($1)`, note)
				w.mu.Lock()
				w.tried++
				if err == nil {
					w.acked = append(w.acked, note)
				}
				w.mu.Unlock()
			}
		}()
	}
	t.Cleanup(w.halt)
	return w
}

func (w *writer) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// lost returns the acknowledged notes that node does not hold.
func (w *writer) lost(t *testing.T, c *Cluster, node int) []string {
	t.Helper()
	w.mu.Lock() // what was acknowledged before the read below began
	acked := slices.Clone(w.acked)
	w.mu.Unlock()
	rows, err := open(t, c.SuperuserURL(node, Database)).Query(`SELECT note FROM notes`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	held := map[string]bool{}
	for rows.Next() {
		var note string
		if err := rows.Scan(&note); err != nil {
			t.Fatal(err)
		}
		held[note] = true
	}
	var lost []string
	for _, note := range acked {
		if !held[note] {
			lost = append(lost, note)
		}
	}
	return lost
}

// freezeLoop freezes the leader past its TTL freezes times while w writes, and wakes it once
// another node leads: the woken node must become a replica and every write acknowledged
// meanwhile must survive. Patroni 3.0.2 on etcd's v3 API fails this (the woken leader
// overwrites the lock; docs/ha.md).
func freezeLoop(t *testing.T, c *Cluster, w *writer, freezes int) {
	t.Helper()
	ctx := context.Background()
	retaken, lostTotal := 0, 0
	for i := range freezes {
		frozen, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Freeze(frozen); err != nil {
			t.Fatal(err)
		}
		promoted := waitLeader(t, c, frozen, fmt.Sprintf("freeze %d of %s", i+1, c.Name(frozen)))
		time.Sleep(time.Second) // let the writer get some writes acknowledged by the new leader
		if err := c.Thaw(frozen); err != nil {
			t.Fatal(err)
		}
		waitHealthy(t, c, "the thaw of "+c.Name(frozen))
		now, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if now != promoted {
			retaken++
			t.Errorf("freeze %d: after the thaw %s leads, not %s, which was promoted while %s was frozen", i+1, c.Name(now), c.Name(promoted), c.Name(frozen))
		}
		if lost := w.lost(t, c, now); len(lost) > 0 {
			lostTotal += len(lost)
			t.Errorf("freeze %d: %d acknowledged writes lost: %v", i+1, len(lost), lost)
		}
		refusesWrites(t, c, frozen)
	}
	t.Logf("%d freezes: the lock taken back %d times, %d acknowledged writes lost", freezes, retaken, lostTotal)
}
