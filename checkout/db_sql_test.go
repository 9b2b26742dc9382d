package checkout

import (
	"strings"
	"testing"
)

// TestStatementsBound: every named statement of the package was bound when it loaded
// (internal/db.Named); none kept a name.
func TestStatementsBound(t *testing.T) {
	for name, text := range map[string]string{
		"claimOrder": claimOrderSQL.text, "claimPlainOrder": claimPlainOrderSQL.text,
		"completeOrder": completeOrderSQL.text, "completePaidOrder": completePaidOrderSQL.text, "cancelOrder": cancelOrderSQL.text,
		"completeRefund": completeRefundSQL.text, "refundTombstone": refundTombstoneSQL.text,
		"claimRefundKey": claimRefundKeySQL.text, "reserveRefund": reserveRefundSQL.text,
		"createRefund": createRefundSQL.text, "settleCompensation": settleCompensationSQL.text,
		"oweRefund": oweRefundSQL.text,
	} {
		if i := strings.IndexByte(text, ':'); i >= 0 {
			t.Errorf("%s: a ':' is left at %d:\n%s", name, i, text)
		}
	}
}
