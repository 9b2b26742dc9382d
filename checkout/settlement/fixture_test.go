package settlement

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/installments"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// actionEnv is the shared environment (checkouttest.Env), paying on the sandbox itself:
// what the movements a settlement counts are made with, through the same calls the API
// makes; and the installment runs, on the env's clock and provider.
type actionEnv struct {
	*checkouttest.Env
	charger *installments.Charger
}

func newActionEnv(env *checkouttest.Env) *actionEnv {
	return &actionEnv{Env: env, charger: installments.New(env.DB, env.Sandbox, installments.Config{Now: env.Now}, nil)}
}

// installmentEnv is an action env whose client keeps its days in zone, with a saved card
// of customer cus_1 (checkouttest.Customer) to order installment plans on.
type installmentEnv struct{ *actionEnv }

func newInstallmentEnv(t *testing.T, zone string, now time.Time) *installmentEnv {
	t.Helper()
	return &installmentEnv{newActionEnv(checkouttest.New(t, checkouttest.Options{Zone: zone, Now: now, SavedCard: true}))}
}

// run runs the installment job at the instant at and returns what it did.
func (e *installmentEnv) run(at string) installments.Result {
	e.T.Helper()
	res, err := e.charger.Run(context.Background(), checkouttest.UTC(at))
	if err != nil {
		e.T.Fatalf("installments at %s: %v", at, err)
	}
	return res
}
