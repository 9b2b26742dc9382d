// Package outbox records what happened to a client's orders as events, and hands each
// event to the parts of tekrar that tell the world about it (client webhooks, e-mail
// receipts), whose own work runs on River, a job queue on tekrar's own Postgres.
//
// # Events exist if and only if their change committed
//
// An event is a row of outbox_events written by the statement or transaction that makes
// the change it describes: the order's completion writes order.paid, the refund's
// insertion refund.created, and so on. A change that rolls back, a crash before the
// commit, a replay that changes nothing or an old lease owner whose write matches no row
// writes no event. The same statement queues the event for dispatch (a trigger on
// outbox_events inserts its row of outbox_queue, migration 48), so an event that is not
// queued, or a queued dispatch without its event, cannot be committed either.
//
// The event types are the Type constants; each one's data is documented in docs/outbox.md
// and is thin and stable: public ids, status, amounts, never card data or secrets.
//
// # One writer
//
// InsertSQL is the only statement that inserts events. A statement that writes events
// defines a CTE new_events (client_id, type, order_id, payload, created_at), the types as
// TypeSQL literals, and splices InsertSQL after it as its data-modifying CTE (or as its
// main statement); Insert, for a change made of several statements, splices it the same
// way. It is shaped so because:
//
//   - the event must be written by the statement that makes the change, fenced with it: a
//     fenced completion that matches no row (a key taken over) writes no event, and an
//     event that cannot be written fails the change. A separate call would cost the hot
//     path (an order's completion) a round trip, and would have to read the fence's
//     outcome back first.
//   - a SQL function cannot be that writer: called from a CTE that nothing reads, Postgres
//     skips it (only data-modifying CTEs always run), so the writer has to be an INSERT
//     spliced into the statement.
//   - InsertSQL has no parameters, so that statements with named and with numbered
//     parameters splice the same text, and the types are literals rather than parameters,
//     so that each statement's text stays constant (prepared once per connection) and an
//     unknown type stops the package from loading rather than failing a request.
//
// new_events is read once, so Postgres inlines it: each statement's plan is what it was
// when it wrote its own INSERT.
//
// # The order's sequence
//
// InsertSQL also numbers each event about an order (SequenceField in its data), from the
// order's row (next_event_sequence, migration 43), under the row lock the transaction then
// holds: consumers, who receive deliveries in any order, tell a late event from a newer one
// by it, and since it is stored with the event every retry and channel carries the same
// number. Being the one writer, InsertSQL numbers the events of every statement, and of a
// type added later, with no code of their own.
//
// # Dispatch
//
// Each process's Dispatcher takes the oldest queued events, many at a time, deletes their
// queue rows and calls every Handler for each, in one transaction: the events are
// dispatched exactly when their handlers' work commits. It replaced a River job per event
// (fetched, run in its own transaction, completed), whose lifecycle cost a payment more of
// Postgres's time than its own completion did (docs/performance.md). A Dispatcher that dies
// or stalls holds its events only by its open transaction's row locks, which Postgres
// releases when the connection goes or the transaction stays idle past Hold; they are then
// dispatched by another, and the stalled one cannot commit later. When a handler fails, the
// batch rolls back and its events are dispatched one a transaction, so that an event that
// cannot be dispatched waits alone (its backoff, then discarded, shown in the console).
//
// # Handlers
//
// A handler does no slow work in the dispatch's transaction: it writes its own rows (a
// delivery per endpoint, a receipt to send) and inserts its own River jobs in tx, with the
// dispatcher's client,
//
//	outbox.Jobs(ctx).InsertTx(ctx, tx, args, opts)
//
// so that its fan-out commits whole or not at all, with the event's dispatch. The
// contract:
//
//   - A handler is idempotent. A batch is dispatched again, event by event, when any
//     handler fails; a dispatcher may crash after a handler ran but before the transaction
//     committed; a queue row lost and restored (a failover) dispatches its event again: a
//     handler's rows are inserted with ON CONFLICT DO NOTHING on a key that includes the
//     event id, and its jobs with River's unique options (UniqueOpts{ByArgs: true}) or
//     behind such a row.
//   - A handler returns an error only for a failure worth retrying the dispatch for (the
//     database); it never calls the network.
//   - Consumers outside tekrar see each event at least once, and deduplicate on its id.
package outbox
