package checkout

import (
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/psp"
)

// ReceiveProviderEventForTest hands the provider inbox (checkout/inbox) one event of the
// provider "psp", as its webhook would, on the clock now. The inbox imports checkout, so
// this package's tests cannot import it; the external test file
// provider_inbox_ext_test.go sets this variable.
var ReceiveProviderEventForTest func(s *Service, db *sqlx.DB, now func() time.Time, body []byte, pe psp.Event) (string, error)

// receiveProviderEvent hands the inbox pe (body as the provider sent it), on the env's clock.
func (e *actionEnv) receiveProviderEvent(body []byte, pe psp.Event) (string, error) {
	e.t.Helper()
	return ReceiveProviderEventForTest(e.s, e.db, e.s.cfg.Now, body, pe)
}
