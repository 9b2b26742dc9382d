package psp

import (
	"context"
	"fmt"
)

// A provider says what it promises.
//
// Recovery decides from the row of the provider it charges through (MayResend, CanFence,
// LookUpBy, LookUpComplete). The row comes from the provider itself, not from a setting:
// a setting can say "sandbox" while the process charges through a key-less one, and the
// first re-send it allows is a second charge.

// Promiser is a provider that says what it promises: its row of the capability table, with
// its own window where it has one (the sandbox's KeyWindow).
type Promiser interface {
	Capability() Capability
}

// ProviderUndeclared names the row of a provider that does not say what it promises.
const ProviderUndeclared = "undeclared"

// Undeclared is the row recovery assumes of a provider that does not say (no Promiser, or
// one that could not be asked yet): the least any provider promises. Its keys are not
// replayed, so a charge is never sent twice; it cannot fence, so giving up owes a refund;
// a charge is found by key only, and a look-up's lag is not documented, so a "not found" is
// never final. Nothing it allows can charge twice; what it costs is orders canceled that a
// re-send could have paid.
func Undeclared() Capability {
	return Capability{
		Provider:   ProviderUndeclared,
		KeysReplay: SupportNo, KeyWindow: 0, KeyStores: StoresNotDocumented,
		Fence:     FenceNone,
		FindByKey: SupportYes, FindByReference: SupportNo, FindByListing: SupportNo,
		FindLag: DurationNotDocumented,
	}
}

// PromisesOf is p's row: what p says (Promiser), or Undeclared.
func PromisesOf(p Provider) Capability {
	if pr, ok := p.(Promiser); ok {
		return pr.Capability()
	}
	return Undeclared()
}

// ChargesByReference asks p for the charges of reference (ReferenceFinder), and answers
// ErrLookupUnsupported for a provider that finds none this way: for wrappers that forward
// the optional interface whatever they wrap, and for recovery.
func ChargesByReference(ctx context.Context, p Provider, reference string) ([]Charge, error) {
	f, ok := p.(ReferenceFinder)
	if !ok {
		return nil, fmt.Errorf("%w: the provider finds no charge by reference", ErrLookupUnsupported)
	}
	return f.ChargesByReference(ctx, reference)
}
