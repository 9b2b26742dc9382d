package checkout

import (
	"context"
	"time"
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

// NewCompleterForTest returns the pass of a completer working for s.
var NewCompleterForTest func(s *Service, cfg CompleterConfig) func(context.Context) (CompleterResult, error)

// testCompleter is a completer of package completer, as the root's tests drive it.
type testCompleter struct {
	pass func(context.Context) (CompleterResult, error)
}

func newCompleter(s *Service, cfg CompleterConfig) testCompleter {
	return testCompleter{NewCompleterForTest(s, cfg)}
}

func (c testCompleter) Pass(ctx context.Context) (CompleterResult, error) { return c.pass(ctx) }
