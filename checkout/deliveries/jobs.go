package deliveries

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/outbox"
)

// Queue is the River queue of delivery jobs: its own, so that slow endpoints do not hold up
// the dispatch of events.
const Queue = "webhooks"

// DeliverArgs is the job of one attempt schedule of one delivery. Scheduled jobs are
// unique per delivery (River's unique insert by args), so that a fan-out run twice queues
// one job; a manual redelivery carries the nonce of the operator's form, which makes it its
// own job, once per form.
type DeliverArgs struct {
	DeliveryID int64  `json:"delivery_id"`
	Manual     bool   `json:"manual,omitempty"`
	Nonce      string `json:"nonce,omitempty"`
}

// Kind names the job in River's table.
func (DeliverArgs) Kind() string { return "webhook_delivery" }

// InsertOpts: unique by args; many attempts allowed, for a failure of tekrar's own (the
// schedule of the endpoint's failures is the delivery row's, see DeliverWorker).
func (DeliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 50, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// DeliverWorker runs the attempts. An attempt that leaves the delivery pending snoozes the
// job until the delivery's next attempt is due: the schedule (backoff, jitter, horizon)
// lives in the delivery row, where the console shows it, and River only wakes the job up
// at that time. A snooze does not count as a River attempt; River's own retries are kept
// for failures of tekrar's (the database down), and a job killed mid-attempt is rescued
// (TEKRAR_OUTBOX_RESCUE_AFTER) and attempts again, under the same webhook-id. A job's
// timeout is the River client's (half the rescue time); keep it above AttemptTimeout.
type DeliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	Deliverer *Deliverer
}

// Work makes one attempt, once the endpoint and its client have a free slot (lease.go);
// while they have none, the job waits, snoozed, without counting an attempt, until an
// attempt that ends wakes it.
func (w *DeliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	jobs, _ := river.ClientFromContextSafely[*sql.Tx](ctx) // nil: no waiter is woken
	lease, wait, err := w.Deliverer.claim(ctx, job.Args.DeliveryID, job.ID, job.Args.Manual)
	if err != nil {
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	defer w.Deliverer.release(jobs, lease)
	out, err := w.Deliverer.Attempt(ctx, job.Args.DeliveryID, job.Args.Manual)
	if w.Deliverer.Observe != nil {
		w.Deliverer.Observe(out, err)
	}
	if errors.Is(err, ErrDeliveryNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	if out.State == StatePending && !job.Args.Manual {
		return river.JobSnooze(max(out.NextAt.Sub(w.Deliverer.now()), 0))
	}
	return nil
}

// AddWorkers registers the delivery worker.
func AddWorkers(workers *river.Workers, d *Deliverer) {
	river.AddWorker(workers, &DeliverWorker{Deliverer: d})
}

// backlogFor is how far back FanOut counts a client's deliveries never attempted.
const backlogFor = time.Hour

// FanOut creates, in tx, one delivery of ev per enabled endpoint of its client subscribed
// to its type, and a job for each. Run again for the same event (the outbox retrying), it
// creates nothing more.
//
// A job queued while its client already has inFlight.Client deliveries never attempted
// (queued, or in their first attempt) is queued waiting (lease.go): snoozed, among the
// client's waiters, to be woken when one of the client's attempts ends. A client's burst
// (an event fans out to each of its endpoints) then costs the queue nothing, where each of
// its jobs would be fetched only to find the client's slots taken, ahead of every other
// client's deliveries.
func FanOut(ctx context.Context, tx *sql.Tx, jobs *river.Client[*sql.Tx], ev outbox.Event, inFlight InFlight) (int, error) {
	ids, err := CreateDeliveries(ctx, tx, ev)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	// The client's deliveries never attempted, these ones included. Those of events older
	// than backlogFor are left out: a delivery that lost its job (River gave up on it after
	// failures of tekrar's own) would otherwise count for ever, and leave every later job
	// of its client waiting for its own snooze.
	var queued int
	if err := tx.QueryRowContext(ctx, backlogSQL, ev.ClientID, ev.CreatedAt.Add(-backlogFor)).Scan(&queued); err != nil {
		return 0, fmt.Errorf("fan out %s: count queued deliveries: %w", ev.ID, err)
	}
	ahead := queued - len(ids)
	for i, id := range ids {
		var opts *river.InsertOpts
		waiting := ahead+i >= inFlight.client()
		now := time.Now() // River's clock
		if waiting {
			opts = &river.InsertOpts{ScheduledAt: now.Add(WaitAtMost)}
		}
		res, err := jobs.InsertTx(ctx, tx, DeliverArgs{DeliveryID: id}, opts)
		if err != nil {
			return 0, fmt.Errorf("queue delivery %d of %s: %w", id, ev.ID, err)
		}
		if waiting && !res.UniqueSkippedAsDuplicate {
			if _, err := tx.ExecContext(ctx, queueWaitingSQL, res.Job.ID, ev.ClientID, id, now); err != nil {
				return 0, fmt.Errorf("queue delivery %d of %s: wait: %w", id, ev.ID, err)
			}
		}
	}
	return len(ids), nil
}

// Redeliver queues, in tx, an operator's redelivery of a delivery: one more attempt, with
// the same body and webhook-id, whatever the delivery's state. nonce is the console form's:
// a form posted twice queues one job.
func Redeliver(ctx context.Context, tx *sql.Tx, jobs *river.Client[*sql.Tx], deliveryID int64, nonce string) error {
	if _, err := jobs.InsertTx(ctx, tx, DeliverArgs{DeliveryID: deliveryID, Manual: true, Nonce: nonce}, nil); err != nil {
		return fmt.Errorf("queue redelivery of %d: %w", deliveryID, err)
	}
	return nil
}

// CreateDeliveries is FanOut's part in the database: the deliveries it created now (none
// for an event fanned out before). A delivery's horizon runs from the event's time.
func CreateDeliveries(ctx context.Context, tx *sql.Tx, ev outbox.Event) ([]int64, error) {
	payload, err := ev.Body() // the same body as every channel's: docs/outbox.md
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, fanOutSQL, ev.ID, ev.Type, ev.ClientID, string(payload), ev.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("fan out %s: %w", ev.ID, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("fan out %s: %w", ev.ID, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fan out %s: %w", ev.ID, err)
	}
	return ids, nil
}

// Handler is the outbox's consumer: it fans each event out to the client's endpoints in
// the event's dispatch transaction, and queues their jobs with the dispatcher's River
// client (outbox.Jobs), so that they commit exactly when the dispatch
// does. It is idempotent, as the outbox asks: a second dispatch of an event creates no
// delivery and no job. InFlight is the Deliverer's.
type Handler struct {
	InFlight InFlight
}

// HandleEvent fans ev out.
func (h Handler) HandleEvent(ctx context.Context, tx *sql.Tx, ev outbox.Event) error {
	jobs := outbox.Jobs(ctx)
	if jobs == nil {
		return fmt.Errorf("fan out %s: no River client to queue deliveries with", ev.ID)
	}
	_, err := FanOut(ctx, tx, jobs, ev, h.InFlight)
	return err
}
