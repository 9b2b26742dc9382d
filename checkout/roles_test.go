package checkout

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
)

// The roles beside the root that work on keys (checkout/completer, checkout/operator)
// import it, so the root's tests reach them through the variables below, set by
// roles_hook_test.go, and in the shapes below, which mirror the roles' own.

// CompleterConfig is completer.Config as the root's tests set it.
type CompleterConfig struct {
	Grace, AttentionAfter time.Duration
	Batch                 int
}

// CompleterResult is completer.Result.
type CompleterResult struct {
	Completed, Canceled, Attention, Retry, Compensated, CompensationsOK int
}

// NewCompleterForTest returns the pass of a completer working for s on db.
var NewCompleterForTest func(db *sqlx.DB, s *Service, cfg CompleterConfig) func(context.Context) (CompleterResult, error)

// testCompleter is a completer of package completer, as the root's tests drive it.
type testCompleter struct {
	pass func(context.Context) (CompleterResult, error)
}

func newCompleter(s *Service, cfg CompleterConfig) testCompleter {
	return testCompleter{NewCompleterForTest(s.db, s, cfg)}
}

func (c testCompleter) Pass(ctx context.Context) (CompleterResult, error) { return c.pass(ctx) }

// Recorder is operator.Recorder.
type Recorder func(ctx context.Context, tx *sqlx.Tx, detail map[string]any) error

// ActionResult is operator.ActionResult.
type ActionResult struct {
	Done    bool
	Outcome string
	State   string
	Detail  map[string]any
}

// The outcomes of the operator's actions that the root's tests expect (operator.Outcome*).
const (
	OutcomeCanceled       = "canceled"
	OutcomeRefundRefused  = "refund_refused"
	OutcomeAlreadyExpired = "already_expired"
)

// OperatorRefund is operator.OperatorRefund.
type OperatorRefund struct {
	OrderID string
	RefundInput
	Nonce string
	Meta  Meta
}

// OperatorForTest returns the operator's actions on s, whose database is db.
var OperatorForTest func(db *sqlx.DB, s *Service) TestOperator

// TestOperator is what the root's tests call of operator.Actions.
type TestOperator struct {
	ReleaseKey       func(ctx context.Context, clientID int64, key string, record Recorder) (ActionResult, error)
	ExpireKey        func(ctx context.Context, clientID int64, key string, record Recorder) (ActionResult, error)
	RefundAsOperator func(ctx context.Context, in OperatorRefund) (any, error)
}

func operatorOf(s *Service) TestOperator { return OperatorForTest(s.db, s) }
