// Package reconcile reconciles the payment provider's charges with tekrar's orders: the
// scheduled task "reconcile" (internal/app) and `tekrar reconcile` run it
// (docs/recovery.md, "Reconciliation").
//
// tekrar's orders and the provider's ledger can disagree in ways no single request sees: a
// charge made under a key tekrar gave up on, a charge made at the provider by hand, a
// charge whose amount is not its order's, an order recorded paid whose charge the provider
// does not have. A run walks the provider's charges of a window (ListCharges, page by page)
// against tekrar's orders:
//
//   - a charge recorded on a payment: fine, unless its amount or currency differs from the
//     payment's or the order's (finding amount_mismatch);
//   - a succeeded charge of a pending order made under that order's own key: fine, the
//     order can still complete with it (its worker, a retry or the completer will);
//   - any other succeeded charge belongs to no order that can complete with it (no order,
//     an order canceled or declined, or one made under another key): finding orphan_charge,
//     and a compensation that refunds what the provider has not refunded of it (held while
//     the charge's dispute is open, docs/providers.md). The compensation is keyed by the
//     charge key, so however many runs meet the charge, concurrently or again after a kill,
//     one row is written and one refund is made (under the refund key checkout derives from
//     the charge key). It is audited by the statement that writes it;
//   - an order of the window recorded paid whose charge the walk did not meet, and the
//     provider confirms it does not have as succeeded: finding paid_without_charge.
//
// The run then drives the compensations it met, as the completer does
// (checkout.Service.DriveCompensations), so that a run by hand finishes the job; whatever it
// leaves (a kill, a provider down) the completer of every serve process drives later.
// Findings are keyed by (kind, charge): a rerun adds no row.
//
// # Why it walks the provider's ledger
//
// The disagreements it is for are charges tekrar does not know it has: walking tekrar's
// orders would never meet them. Only orders recorded paid are read from tekrar's side, and
// each whose charge the walk did not meet is looked up at the provider by its key before it
// counts, since an order is created before its charge and the two windows differ. A
// listing or look-up that fails fails the run (the next run starts again: the provider's
// answers, docs/providers.md); the compensations met before it are still driven, since those
// debts are recorded already.
//
// # What it owns
//
// A run writes, with the statements in reconcile_sql.go:
//
//   - reconciliation_runs: one row per run (its window, process, counts and error), written
//     when it starts and finished when it ends; a run killed half way stays unfinished;
//   - reconciliation_findings: one row per (kind, charge), noted again by each rerun;
//   - compensations: the refund owed for an orphan charge (source 'reconcile'), with its
//     audit_log entry (compensate_orphan_charge) and, for a charge of an order, the order's
//     compensation.created event in outbox_events, all in the statement that writes it.
//
// It reads payments, orders, installments, the key rows that created orders
// (idempotency_keys) and clients; checkout's rules it shares (which statuses are pending or
// charged, the provider key of an order's charge, which look-up answer means no charge) it
// takes from checkout. checkout imports nothing of it; the app wires it.
//
// # Its crash point
//
// checkout.CrashReconcileAfterOrphan: an orphan's compensation is committed, the rest of
// the window is not walked and nothing is refunded yet. The next run, or the completer,
// refunds it once (TestReconcileTwiceAtOnceAndKilledHalfWay in cmd/tekrar).
//
// # Its lock
//
// A run takes none: two at once, or one after a run killed half way, write each finding and
// each compensation once and refund each charge once, since every write is keyed (the
// finding by kind and charge, the compensation by charge key, its refund by the key derived
// from it). The scheduled task's lock (internal/schedule) lets one scheduled run happen at a
// time; `tekrar reconcile` does not take it.
package reconcile
