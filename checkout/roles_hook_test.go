package checkout_test

import (
	"context"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/completer"
	"github.com/tekrar/tekrar/checkout/operator"
)

// The package's tests drive the roles beside it through the variables of roles_test.go.
func init() {
	checkout.NewCompleterForTest = func(db *sqlx.DB, s *checkout.Service, cfg checkout.CompleterConfig) func(context.Context) (checkout.CompleterResult, error) {
		c := completer.New(db, s, completer.Config{Grace: cfg.Grace, AttentionAfter: cfg.AttentionAfter, Batch: cfg.Batch},
			slog.New(slog.DiscardHandler))
		return func(ctx context.Context) (checkout.CompleterResult, error) {
			r, err := c.Pass(ctx)
			return checkout.CompleterResult(r), err
		}
	}
	checkout.OperatorForTest = func(db *sqlx.DB, s *checkout.Service) checkout.TestOperator {
		ops := operator.New(db, s)
		return checkout.TestOperator{
			ReleaseKey: func(ctx context.Context, clientID int64, key string, record checkout.Recorder) (checkout.ActionResult, error) {
				r, err := ops.ReleaseKey(ctx, clientID, key, operator.Recorder(record))
				return checkout.ActionResult(r), err
			},
			ExpireKey: func(ctx context.Context, clientID int64, key string, record checkout.Recorder) (checkout.ActionResult, error) {
				r, err := ops.ExpireKey(ctx, clientID, key, operator.Recorder(record))
				return checkout.ActionResult(r), err
			},
			RefundAsOperator: func(ctx context.Context, in checkout.OperatorRefund) (any, error) {
				return ops.RefundAsOperator(ctx, operator.OperatorRefund(in))
			},
		}
	}
}
