package checkout

import "strings"

// The statuses of an order (the order_status domain in migrations). Every one of them is in
// exactly one of PendingStatuses, ChargedStatuses and UnchargedStatuses
// (TestOrderStatusesClassified compares them with the domain's CHECK).
const (
	// StatusPending: the order's charge is not known yet (its key is in progress, or needs
	// attention).
	StatusPending = "pending"
	// StatusPaid, StatusPartiallyRefunded, StatusRefunded: after a successful charge, paid,
	// then partially_refunded and refunded as refunds of it finish. Each keeps the capture,
	// so each may be refunded (up to what is left) and counts as a charge of the customer.
	StatusPaid              = "paid"
	StatusPartiallyRefunded = "partially_refunded"
	StatusRefunded          = "refunded"
	// StatusDisputed: the cardholder disputes the charge (its provider's dispute is open).
	// Charged, but not refundable until the dispute is decided.
	StatusDisputed = "disputed"
	// StatusDeclined, StatusCanceled: the order ended without a charge, for good (the
	// provider declined it, or it was released or compensated before any capture).
	StatusDeclined = "declined"
	StatusCanceled = "canceled"
)

// StatusSet is a set of order statuses named for what it means. Has is its predicate in Go
// and SQL its list in SQL, both read from the same members, so that the two cannot say
// different things (TestStatusSetSQLAgreesWithHas).
type StatusSet struct{ members []string }

func statusSet(members ...string) StatusSet { return StatusSet{members: members} }

// Has reports whether status is one of the set's.
func (s StatusSet) Has(status string) bool {
	for _, m := range s.members {
		if m == status {
			return true
		}
	}
	return false
}

// Members returns the set's statuses, in their order of declaration (a copy).
func (s StatusSet) Members() []string { return append([]string(nil), s.members...) }

// SQL is the set as an SQL list, for "o.status IN "+s.SQL(). The members are constants of
// this file, never input, so quoting them is all there is to do.
func (s StatusSet) SQL() string {
	quoted := make([]string, len(s.members))
	for i, m := range s.members {
		quoted[i] = "'" + strings.ReplaceAll(m, "'", "''") + "'"
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}

var (
	// OrderStatuses are every status an order may have: those the order_status domain's
	// CHECK allows, and Order.status's enum in checkout/api/openapi.yaml
	// (TestOrderStatusesClassified, TestOpenAPIOrderStatuses).
	OrderStatuses = statusSet(StatusPending, StatusPaid, StatusPartiallyRefunded, StatusRefunded,
		StatusDisputed, StatusDeclined, StatusCanceled)

	// PendingStatuses are those of an order whose charge is not known yet.
	PendingStatuses = statusSet(StatusPending)

	// ChargedStatuses are the statuses of an order whose capture stands: paid, refunded in
	// part or whole since, or disputed. Such an order counts as a charge of the customer
	// (double taps, reconciliation's charged orders, refunds the provider reports), and
	// its dispute may open and close.
	ChargedStatuses = statusSet(StatusPaid, StatusPartiallyRefunded, StatusRefunded, StatusDisputed)

	// RefundableStatuses are ChargedStatuses but disputed: an order that may be refunded
	// (up to what is left of its capture), and the statuses that follow its refunds (a
	// refund finishing or failing moves the order between them). A refund during an open
	// dispute could pay the cardholder twice, so a disputed order keeps its status until
	// the dispute is decided.
	RefundableStatuses = statusSet(StatusPaid, StatusPartiallyRefunded, StatusRefunded)

	// UnchargedStatuses are those of an order that ended without a charge, for good: it
	// gives back the stock it took.
	UnchargedStatuses = statusSet(StatusDeclined, StatusCanceled)

	// PlanChargingStatuses are those of an order whose later installments are charged
	// when due: only paid. A refund cancels the unpaid installments, and an open dispute
	// holds them until it is decided (the order is paid again then).
	PlanChargingStatuses = statusSet(StatusPaid)
)
