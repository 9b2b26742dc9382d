package checkout_test

import (
	"context"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/inbox"
	"github.com/tekrar/tekrar/checkout/psp"
)

// The provider inbox, for the tests of package checkout whose orders a provider event
// changes (a refund made at the provider's dashboard): they cannot import it themselves.
func init() {
	checkout.ReceiveProviderEventForTest = func(s *checkout.Service, db *sqlx.DB, now func() time.Time, body []byte, pe psp.Event) (string, error) {
		in := inbox.New(db, s, inbox.Config{Now: now}, slog.New(slog.DiscardHandler))
		defer in.Close()
		return in.Receive(context.Background(), "psp", body, pe)
	}
}
