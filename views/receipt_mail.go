package views

import (
	"fmt"
	"strings"
)

// ReceiptText is the plain-text part of a receipt e-mail: the same facts as ReceiptHTML,
// for mail clients that show no HTML and for the customer who prefers text.
func ReceiptText(r ReceiptMail) string {
	var b strings.Builder
	b.WriteString(ReceiptSubject(r) + "\n\n")
	if r.Refund {
		fmt.Fprintf(&b, "%s refunded %s of your order on %s.\n", r.Merchant, r.Refunded, r.When)
		if r.Reason != "" {
			fmt.Fprintf(&b, "Reason: %s\n", r.Reason)
		}
	} else if r.Installment != "" {
		fmt.Fprintf(&b, "Thank you. %s received your payment of %s, installment %s of your order, on %s.\n",
			r.Merchant, r.Paid, r.Installment, r.When)
	} else {
		fmt.Fprintf(&b, "Thank you. %s received your payment of %s on %s.\n", r.Merchant, r.Total, r.When)
	}
	b.WriteString("\n")
	for _, it := range r.Items {
		fmt.Fprintf(&b, "  %s x %s  %s\n", it.Quantity, it.Name, it.Amount)
	}
	fmt.Fprintf(&b, "\nTotal: %s\n", r.Total)
	if r.Refund {
		fmt.Fprintf(&b, "Refunded: %s\n", r.Refunded)
	}
	if r.Installment != "" {
		fmt.Fprintf(&b, "Installment %s: %s\n", r.Installment, r.Paid)
	}
	if r.Card != "" {
		fmt.Fprintf(&b, "Card: %s\n", r.Card)
	}
	fmt.Fprintf(&b, "\nOrder %s\n", r.OrderID)
	if r.RefundID != "" {
		fmt.Fprintf(&b, "Refund %s\n", r.RefundID)
	}
	fmt.Fprintf(&b, "Reference %s\n", r.MessageID)
	return b.String()
}
