package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tekrar/tekrar/checkout/receipts"
)

// refusedReasons are the reasons a receipt is refused (tekrar_receipts_refused_total's
// reason).
var refusedReasons = []string{receipts.ReasonRateLimited, receipts.ReasonDailyCap}

func newReceiptsRefused() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tekrar_receipts_refused_total",
		Help: "Receipts this process stored refused, not sent, by reason: rate_limited (the client's minute was full) or daily_cap (its UTC day was) (docs/receipts.md).",
	}, []string{"reason"})
	for _, r := range refusedReasons {
		c.WithLabelValues(r)
	}
	return c
}

// ReceiptRefused counts one receipt refused for reason (receipts.Recorder.Refused). It is
// counted in the dispatch that refused it: a dispatch rolled back and run again counts its
// receipt again.
func (m *Metrics) ReceiptRefused(reason string) {
	m.receiptsRefused.WithLabelValues(reason).Inc()
}
