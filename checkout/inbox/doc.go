// Package inbox receives the payment provider's webhooks: POST /webhooks/psp (checkout/api)
// hands it each verified delivery, and the console replays its dead letters through it
// (docs/webhooks-in.md). It is request-driven: it runs in the request that delivers an
// event, and its one background task writes the refusal counts.
//
// # What it owns
//
// It writes these tables, with the statements in inbox.go, deadletters_sql.go and
// refusals.go:
//
//   - provider_events: each event once, under (provider, event id), with its outcome; a
//     redelivery only counts on its row;
//   - provider_charges: per charge, the state and sequence of the newest event applied;
//   - provider_dead_letters: the raw bytes of a signed delivery it cannot store, a
//     redelivery counted on its row, and the replay that took it at last;
//   - provider_inbox_refusals: the refused deliveries, counted by minute and reason (and
//     the buckets older than seven days deleted);
//   - orders, refunds and installments (a refund made at the provider: its own refund, the
//     order's refunded amount and status, the plan's unpaid installments canceled, through
//     checkout.RecordProviderRefunds), order_disputes and the order's status (a dispute),
//     and outbox_events (order.disputed, and the events of the statements it calls);
//   - through checkout.Service.SettleProviderCharge, an order whose charge's answer was
//     lost: the order, its payment and its key's response, settled as the worker would
//     have, or the compensation of a canceled order made due.
//
// It reads payments (which order holds a charge) and, through checkout, the order's key,
// locked. checkout imports nothing of it; the app wires it.
//
// # Its crash point
//
// An event, the charge's new state and the effect on the order commit in one transaction.
// checkout.CrashInboxBeforeCommit ("inbox_before_commit") is the moment all of it is
// written and nothing committed: a process killed there leaves nothing of the event, and
// the provider's redelivery (to this replica or another) applies it once
// (TestWebhookKilledWhileApplying in cmd/tekrar). That is why a failure that may pass is
// answered 5xx, and one that would repeat on every redelivery is kept as a dead letter and
// acknowledged: the provider only stops resending on a 2xx.
//
// # Why the refusal counts are written in the background
//
// A forged, stale or altered delivery is answered 400 and leaves only a count. Counting it
// synchronously would take a database connection, shared with checkout's traffic, for
// every forged delivery, and every refusal of a minute and reason would update the same
// row, so a storm of them would queue on that row's lock and answer slower the harder it is
// sent; and with the table unwritable the 400 would wait on the database it does not need
// (TestProviderWebhookRefusalUncountedStill400). So CountRefusal adds to a tally in
// memory (a mutex and a map entry) and a writer started by New writes it every
// Config.RefusalFlush, one upsert per minute and reason; Close writes what is left. A
// process killed loses the counts of at most that long, which the console's figures can
// afford. The key events' writer (checkout) used to write these counts with its own; they
// are the inbox's now.
package inbox
