package metrics

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestWrappingKeepsWhatTheProviderPromises: recovery decides from what a provider promises
// (psp.PromisesOf) and finds charges by reference through it (psp.ReferenceFinder); the
// metrics wrapper must show both exactly as the wrapped provider does, in every mode of the
// sandbox and for a provider that says nothing.
func TestWrappingKeepsWhatTheProviderPromises(t *testing.T) {
	d := dbtest.New(t)
	m := New(d, slog.New(slog.DiscardHandler), time.Second)
	ctx := t.Context()
	for _, opts := range []psp.SandboxOptions{{}, {NoCancel: true}, {KeyLess: true}} {
		sb := psp.NewSandbox(d, opts)
		wrapped := m.Provider(sb)
		if got, want := psp.PromisesOf(wrapped), psp.PromisesOf(sb); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: wrapped promises %q, the sandbox %q", opts, got.Provider, want.Provider)
		}
		_, err := psp.ChargesByReference(ctx, sb, "order ord_wrap")
		got, werr := psp.ChargesByReference(ctx, wrapped, "order ord_wrap")
		if (err == nil) != (werr == nil) || (err == nil && len(got) != 0) {
			t.Errorf("%+v: by reference: wrapped %v, the sandbox %v", opts, werr, err)
		}
	}
	if _, err := psp.NewSandbox(d, psp.SandboxOptions{KeyLess: true}).Charge(ctx, psp.ChargeRequest{
		Key: "k1", Amount: 500, Currency: "EUR", CardToken: psp.TokenVisa, Description: "order ord_wrap"}); err != nil {
		t.Fatal(err)
	}
	found, err := psp.ChargesByReference(ctx, m.Provider(psp.NewSandbox(d, psp.SandboxOptions{KeyLess: true})), "order ord_wrap")
	if err != nil || len(found) != 1 {
		t.Errorf("a charge by reference through the wrapper: %d, %v; want the one charge", len(found), err)
	}

	var bare struct{ psp.Provider }
	if got := psp.PromisesOf(m.Provider(bare)); !reflect.DeepEqual(got, psp.Undeclared()) {
		t.Errorf("a wrapped provider that says nothing promises %+v, want Undeclared", got)
	}
}
