package checkout_test

import (
	"context"
	"log/slog"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/completer"
)

// The package's tests drive the roles beside it through the variables of roles_test.go.
func init() {
	checkout.NewCompleterForTest = func(s *checkout.Service, cfg checkout.CompleterConfig) func(context.Context) (checkout.CompleterResult, error) {
		c := completer.New(s, completer.Config{Grace: cfg.Grace, AttentionAfter: cfg.AttentionAfter, Batch: cfg.Batch},
			slog.New(slog.DiscardHandler))
		return func(ctx context.Context) (checkout.CompleterResult, error) {
			r, err := c.Pass(ctx)
			return checkout.CompleterResult(r), err
		}
	}
}
