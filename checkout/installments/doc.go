// Package installments charges the installments of plans that fall due: the scheduled task
// "installments" (internal/app) and `tekrar installments run` run its Charger
// (docs/installments.md). The plan itself is the order's: checkout writes its rows when it
// claims the order, settles the first with the order's charge and cancels the unpaid ones
// when the order ends.
//
// # What it owns
//
// A run writes three tables and nothing else, with the statements in charge_sql.go:
//
//   - installments: it leases one due row at a time for an attempt (attempts, in_flight,
//     provider_key, lease_token, lease_expires_at), then records the attempt's outcome on
//     it, fenced by the lease token: paid (provider_charge_id, paid_at), scheduled again
//     for its next retry day (next_attempt_at, decline_code), or attention, an operator's;
//   - orders: a paid installment adds its amount to the order's captured_amount;
//   - outbox_events: each outcome writes its event (installment.paid, installment.declined,
//     installment.needs_attention; docs/outbox.md) in the outcome's statement, through the
//     one outbox writer (checkout/outbox), so that an outcome and its event exist together
//     or not at all.
//
// It reads orders (a plan is charged only while its order is in
// checkout.PlanChargingStatuses; the order's intent, customer and card) and clients (the time
// zone whose day starts make an installment due), and charges at the provider, under the key
// checkout.InstallmentKey derives. What it makes of the provider's answers is psp's table (psp.NoChargeYet,
// psp.ChargeOutcomeUnknown). checkout imports nothing of it.
//
// # Crash points
//
// checkout.CrashInstallmentAfterClaim: an attempt is claimed and leased, the provider not
// called. checkout.CrashInstallmentAfterProvider: the provider answered, nothing of it is
// stored. After either, the installment stays in flight under its lease; the run that takes
// it once the lease lapses makes the same attempt under the same key, looking its charge up
// first, so the provider charges it at most once.
//
// # One installment at a time
//
// A run claims one due installment (FOR UPDATE SKIP LOCKED, then a lease) in a short
// transaction, calls the provider outside any transaction, and records the outcome in a
// statement of its own. Claiming a batch would hold leases on installments this run is not
// yet charging, which a run dying half way would keep from every other run until they lapse;
// one at a time, any number of runs on any number of processes share the due installments
// without waiting on each other, and a crash strands at most the one in flight. No row lock is
// held across the provider's call, so a refund of the order waits only for the claim, not the
// charge (and is refused while an attempt is in flight). A run takes no lock of its own: the
// scheduled task's (internal/schedule) only keeps the deployment from running it twice per
// tick.
package installments
