package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tekrar/tekrar/checkout"
)

// posMetrics count the registers' batches of offline sales (POST /v1/pos/sales). The
// requests themselves are in tekrar_http_request_duration_seconds; these say what became
// of each sale in them.
type posMetrics struct {
	batches  *prometheus.CounterVec
	sales    *prometheus.CounterVec
	oversold prometheus.Counter
}

// saleOutcomes are the outcomes of a register's sale (tekrar_pos_sales_total's outcome).
var saleOutcomes = []string{checkout.SaleCreated, checkout.SaleReplayed, checkout.SaleConflict, checkout.SaleExpired,
	checkout.SaleDeclined, checkout.SaleInvalid, checkout.SaleInProgress, checkout.SaleFailed}

func newPOSMetrics() posMetrics {
	p := posMetrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tekrar_pos_batches_total",
			Help: "Batches of register sales (POST /v1/pos/sales) this process answered sale by sale, by client.",
		}, []string{"client"}),
		sales: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tekrar_pos_sales_total",
			Help: "Register sales in the batches this process answered, by outcome (docs/pos.md).",
		}, []string{"outcome"}),
		oversold: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tekrar_pos_oversold_sales_total",
			Help: "Register sales this process created that sold more units than the stock level held.",
		}),
	}
	for _, o := range saleOutcomes {
		p.sales.WithLabelValues(o)
	}
	return p
}

func (p posMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.batches, p.sales, p.oversold}
}

// Sales counts one batch of a register's sales by the outcome of each
// (checkout.Config.ObserveSales). A batch refused whole (too large, invalid, the store
// down) is not counted here: its request's status is.
func (m *Metrics) Sales(client int64, out []checkout.SaleOutcome) {
	m.pos.batches.WithLabelValues(strconv.FormatInt(client, 10)).Inc()
	for _, o := range out {
		m.pos.sales.WithLabelValues(o.Outcome).Inc()
		if o.Oversold && o.Outcome == checkout.SaleCreated {
			m.pos.oversold.Inc()
		}
	}
}
