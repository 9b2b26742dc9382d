package deliveries

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/tekrar/tekrar/internal/db"
)

// The bound on attempts in flight, which keeps clients from delaying each other. Every
// process runs one queue of delivery workers shared by every client, each event fans out to
// every endpoint of its client, and an attempt at an endpoint that does not answer holds its
// worker for AttemptTimeout: without a bound, one client's dead endpoints fill every worker
// and every other client's deliveries wait behind them in turn (measured: 1.2 s became
// 48.6 s). So an attempt first takes a lease, counted in Postgres under the client's
// advisory lock so that the bound holds across every process: at most EndpointInFlight per
// endpoint and ClientInFlight per client. A job that finds no free slot joins the client's
// waiters and snoozes (River does not count a snooze as an attempt, and the delivery's own
// schedule is untouched); an attempt that ends wakes the oldest waiters that may run now, and
// keeps their slots for them for WakeHold. Waiting costs a job no worker, and the client no
// polling.
//
// Per-client River queues would isolate clients too, but River's queues are fixed when a
// process starts, and clients are created at any time.
const (
	// EndpointInFlight is how many attempts one endpoint may have in flight unless
	// TEKRAR_WEBHOOK_ENDPOINT_IN_FLIGHT says otherwise: two, so that a healthy endpoint's
	// burst is not sent strictly one by one.
	EndpointInFlight = 2
	// ClientInFlight is how many attempts one client may have in flight across every
	// process unless TEKRAR_WEBHOOK_CLIENT_IN_FLIGHT says otherwise: a quarter of one
	// process's 20 delivery workers, so that three clients with dead endpoints still leave a
	// process a quarter of its workers. It also bounds a healthy client's delivery rate (5
	// attempts at once: about 50 a second at 100 ms an answer), so a fleet of many processes
	// serving a client of many events raises it.
	ClientInFlight = 5
	// LeaseFor is how long a lease is held at most: an attempt's timeout and room to record
	// it. A process killed during an attempt frees the slot after it.
	LeaseFor = AttemptTimeout + 20*time.Second
	// WaitAtMost is a waiting job's snooze: it looks again by itself after it (varied by up
	// to a fifth, and River's scheduler makes it available within 5 s more) if no ended
	// attempt woke it before, which happens only when its process died between the end of
	// an attempt and its wake-up, or when the job's snooze was not yet recorded when the
	// attempt ended.
	WaitAtMost = LeaseFor
	// WakeHold is how long the slot of a woken waiter is kept for it, so that a job queued
	// later does not take it first: River's poll and room for a loaded process.
	WakeHold = 5 * time.Second
)

// InFlight is the bound on attempts in flight; a zero field is its default
// (EndpointInFlight, ClientInFlight).
type InFlight struct {
	Endpoint, Client int
}

func (f InFlight) endpoint() int {
	if f.Endpoint > 0 {
		return f.Endpoint
	}
	return EndpointInFlight
}

func (f InFlight) client() int {
	if f.Client > 0 {
		return f.Client
	}
	return ClientInFlight
}

// leaseTarget is whom an attempt of a delivery is sent to.
type leaseTarget struct {
	EndpointID int64  `db:"endpoint_id"`
	ClientID   int64  `db:"client_id"`
	State      string `db:"state"`
	Locked     bool   `db:"locked"` // there is an attempt to make, and the client's lock is held
}

// lease is an attempt's slot.
type lease struct {
	id, client int64
}

// slots counts the slots a client's endpoints have taken.
type slots struct {
	client     int
	byEndpoint map[int64]int
}

func (s slots) free(f InFlight, endpoint int64) bool {
	return s.client < f.client() && s.byEndpoint[endpoint] < f.endpoint()
}

func takenSlots(ctx context.Context, tx *sqlx.Tx, client int64, wokenAfter time.Time) (slots, error) {
	rows, err := tx.QueryContext(ctx, slotsTakenSQL, client, wokenAfter)
	if err != nil {
		return slots{}, err
	}
	defer rows.Close()
	s := slots{byEndpoint: map[int64]int{}}
	for rows.Next() {
		var endpoint int64
		var n int
		if err := rows.Scan(&endpoint, &n); err != nil {
			return slots{}, err
		}
		s.byEndpoint[endpoint] = n
		s.client += n
	}
	return s, rows.Err()
}

// claim takes a slot for an attempt of delivery id by River job job. It returns the lease
// to release once the attempt is recorded (none when nothing will be sent: an unknown
// delivery, or a finished one and a scheduled attempt), or, when the endpoint or its client
// has no free slot, how long the job should snooze, having joined the client's waiters.
func (d *Deliverer) claim(ctx context.Context, id, job int64, manual bool) (l lease, wait time.Duration, err error) {
	err = db.InTx(ctx, d.DB, "claim webhook attempt", func(tx *sqlx.Tx) error {
		var target leaseTarget
		err := tx.GetContext(ctx, &target, leaseTargetSQL, id, leaseLockClass, manual)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && !target.Locked) {
			_, err = tx.ExecContext(ctx, forgetWaiterSQL, job)
			return err
		}
		if err != nil {
			return fmt.Errorf("claim attempt of delivery %d: %w", id, err)
		}
		now := d.now()
		var leased sql.NullInt64
		if err := tx.GetContext(ctx, &leased, claimSQL, target.ClientID, target.EndpointID, job, id, now,
			now.Add(-WakeHold), now.Add(LeaseFor), d.InFlight.endpoint(), d.InFlight.client()); err != nil {
			return fmt.Errorf("claim attempt of delivery %d: %w", id, err)
		}
		if !leased.Valid {
			wait = d.waitAtMost()
			return nil
		}
		l = lease{id: leased.Int64, client: target.ClientID}
		return nil
	})
	return l, wait, err
}

// waitAtMost is WaitAtMost varied by up to a fifth.
func (d *Deliverer) waitAtMost() time.Duration {
	j := rand.Float64
	if d.Jitter != nil {
		j = d.Jitter
	}
	return time.Duration(float64(WaitAtMost) * (0.8 + 0.4*j()))
}

// release frees an attempt's slot and wakes the client's oldest waiters that may run now
// (through jobs, River's client). It runs even when the job's context has ended (a timeout,
// a shutdown); if it fails, the lease expires by itself after LeaseFor, and the waiters
// wake after WaitAtMost.
func (d *Deliverer) release(jobs *river.Client[*sql.Tx], l lease) {
	if l.id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := db.InTx(ctx, d.DB, "release webhook attempt", func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, leaseLockSQL, leaseLockClass, l.client); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, releaseLeaseSQL, l.id); err != nil {
			return err
		}
		if jobs == nil {
			return nil
		}
		return d.wake(ctx, tx, jobs, l.client)
	})
	if err != nil && d.Logger != nil {
		d.Logger.Warn("webhook attempt lease not released: it expires by itself", "lease", l.id, "err", err)
	}
}

// wake makes the client's oldest waiters that may run now available, in tx, under the
// client's lock.
func (d *Deliverer) wake(ctx context.Context, tx *sqlx.Tx, jobs *river.Client[*sql.Tx], client int64) error {
	now := d.now()
	taken, err := takenSlots(ctx, tx, client, now.Add(-WakeHold))
	if err != nil {
		return err
	}
	var waiters []struct {
		Job      int64 `db:"job_id"`
		Endpoint int64 `db:"endpoint_id"`
	}
	if err := tx.SelectContext(ctx, &waiters, waitersSQL, client, now.Add(-WakeHold)); err != nil {
		return err
	}
	for _, w := range waiters {
		if taken.client >= d.InFlight.client() {
			return nil
		}
		if !taken.free(d.InFlight, w.Endpoint) {
			continue
		}
		job, err := jobs.JobGetTx(ctx, tx.Tx, w.Job)
		if errors.Is(err, river.ErrNotFound) || (err == nil && job.FinalizedAt != nil) {
			if _, err := tx.ExecContext(ctx, forgetWaiterSQL, w.Job); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if job.State == rivertype.JobStateRunning {
			continue // its snooze is not recorded yet: it wakes after WaitAtMost, or at the next release
		}
		if _, err := jobs.JobRetryTx(ctx, tx.Tx, w.Job); err != nil {
			return fmt.Errorf("wake job %d: %w", w.Job, err)
		}
		if _, err := tx.ExecContext(ctx, wokenSQL, w.Job, now); err != nil {
			return err
		}
		taken.client++
		taken.byEndpoint[w.Endpoint]++
	}
	return nil
}
