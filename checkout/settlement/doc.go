// Package settlement writes the nightly settlements: the scheduled task "settle"
// (internal/app) runs SettleDue, and `tekrar settle` runs Settle (docs/settlement.md).
//
// A settlement is one row per client and business day, the day in the client's time zone
// (calendar.Day, the rule installments share), with the day's captured, refunded, disputed
// and compensated totals and counts per currency. Every money movement is counted by
// exactly one settlement: the settlement of a day claims the movements of that day that
// nobody claimed, and the movements of earlier days that are settled already but were
// recorded after their day was settled. Those late ones are the settlement's adjustments:
// they name the day they belong to, and the settled day's row is never rewritten. A
// movement of an earlier day that is not settled yet is left for that day's settlement, so
// the days of a client may be settled in any order and each still counts its own.
//
// # What it owns
//
// It writes three tables and nothing else, with the statements in settle_sql.go
// (migration 00029):
//
//   - settlements: one row per (client, day), with the day's window and zone, inserted
//     once and never updated;
//   - settlement_totals: the row's figures per currency, written with it;
//   - settlement_items: the claims, one per movement (its primary key is the movement's
//     kind and source id), each naming its settlement, its day and whether it is an
//     adjustment.
//
// It reads the movements: payments (succeeded, with their orders for the client),
// installments (paid, after the first), refunds (succeeded), order_disputes and
// compensations (refunded); and clients, for each one's time zone and first day. checkout
// imports nothing of it; it imports checkout for Day, and the app wires it.
//
// # Its lock
//
// Settling a day takes the client's settlement lock, a transaction-scoped Postgres advisory
// lock (class 0x7365, "se", and the client id), so two settlements of one client never
// interleave; a second one waits and then finds the day written. The row is unique by
// (client, day) and a claim is an insert under the movement's primary key, and both commit
// with the totals in one transaction, so a rerun, two runs at once (in one process or two)
// or a run after a crash settle each day once and count each movement once. SettleDue takes
// no lock of its own: it may run in any number of processes at once. The scheduled task's
// lock (internal/schedule) only keeps the deployment from doing the same pass twice.
//
// # Why it is shaped so
//
// Nothing is ever updated, so a settlement says what its transaction saw and an operator's
// export of it never changes; what came late is counted, once, by the next settlement as
// an adjustment, not by rewriting the day. SettleDue waits Config.Grace after a day ends, so
// that a transaction straddling midnight lands on its own day, and runs every 15 minutes
// because days end at different instants for clients in different zones; a pass with
// nothing due costs one query per client. Days older than Config.LookBack are settled by
// hand (`tekrar settle`).
package settlement
