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

// writer inserts notes through the several-host URL, one connection each, until stopped, and
// remembers those whose INSERT was acknowledged: under synchronous replication every one of
// them must survive any failover.
type writer struct {
	mu    sync.Mutex
	acked []string
	tried int
	stop  chan struct{}
	done  chan struct{}
}

func startWriter(t *testing.T, c *Cluster) *writer {
	t.Helper()
	db := open(t, c.URL(Database))
	db.SetMaxIdleConns(0) // a new connection each time finds the primary anew
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			note := "w" + strconv.Itoa(i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := db.ExecContext(ctx, `INSERT INTO notes (note) VALUES ($1)`, note)
			cancel()
			w.mu.Lock()
			w.tried++
			if err == nil {
				w.acked = append(w.acked, note)
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *writer) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
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
