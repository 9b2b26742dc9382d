// Package outbox records what happened to a client's orders as events, and hands each
// event to the parts of tekrar that tell the world about it (client webhooks, e-mail
// receipts) through River, a job queue on tekrar's own Postgres.
//
// # Events exist if and only if their change committed
//
// An event is a row of outbox_events written by the statement or transaction that makes
// the change it describes: the order's completion writes order.paid, the refund's
// insertion refund.created, and so on. A change that rolls back, a crash before the
// commit, a replay that changes nothing or an old lease owner whose write matches no row
// writes no event. The same statement inserts the event's dispatch job (a trigger on
// outbox_events, see migration 19), so an event without its job, or a job without its
// event, cannot be committed either.
//
// The event types are the Type constants; each one's data is documented in docs/outbox.md
// and is thin and stable: public ids, status, amounts, never card data or secrets.
//
// # Handlers
//
// A dispatch job (DispatchArgs) loads its event and calls every registered Handler, in one
// transaction that also completes the job (river.JobCompleteTx). A handler does no slow
// work there: it writes its own rows (a delivery per endpoint, a receipt to send) and
// inserts its own River jobs in tx, with
//
//	river.ClientFromContext[*sql.Tx](ctx).InsertTx(ctx, tx, args, opts)
//
// so that its fan-out commits exactly when the dispatch job completes. The contract:
//
//   - A handler is idempotent. A dispatch job is retried when any handler fails, and a
//     worker may crash after a handler ran but before the transaction committed, or a job
//     may be rescued from a dead replica and run again: a handler's rows are inserted with
//     ON CONFLICT DO NOTHING on a key that includes the event id, and its jobs with River's
//     unique options (UniqueOpts{ByArgs: true}) or behind such a row.
//   - A handler returns an error only for a failure worth retrying the whole dispatch for
//     (the database); it never calls the network.
//   - Consumers outside tekrar see each event at least once, and deduplicate on its id.
package outbox
