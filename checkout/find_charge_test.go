package checkout

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// listingOnly is a provider whose only way to find a charge is a listing (Square's
// ListPayments): its row says so, whatever the sandbox under it could do.
type listingOnly struct{ psp.Provider }

func (listingOnly) Capability() psp.Capability {
	c := psp.Undeclared()
	c.FindByKey, c.FindByListing = psp.SupportNo, psp.SupportYes
	return c
}

// TestFindChargeEachWay finds charges as each row says: by reference at a key-less sandbox
// (the first succeeded of several, the others named; another amount or reference is not
// the order's), and by listing, matched by description or by the charge's id; none found is
// psp.ErrNotFound to every caller.
func TestFindChargeEachWay(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	sb := psp.NewSandbox(dbtest.New(t), psp.SandboxOptions{KeyLess: true, Now: func() time.Time { return now }})
	charge := func(token, description string, amount int64) psp.Charge {
		t.Helper()
		ch, err := sb.Charge(ctx, psp.ChargeRequest{Key: "tekrar_ch_1", Amount: amount, Currency: "TRY", CardToken: token, Description: description})
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	declined := charge(psp.TokenDeclined, "order ord_a", 2500)
	first := charge(psp.TokenVisa, "order ord_a", 2500)
	second := charge(psp.TokenVisa, "order ord_a", 2500)
	charge(psp.TokenVisa, "order ord_a", 999) // another amount: not the order's charge
	other := charge(psp.TokenVisa, "order ord_b", 2500)

	ref := ChargeRef{Key: "tekrar_ch_1", Reference: "order ord_a", Amount: 2500, Currency: "TRY", Since: now.Add(-time.Minute)}
	for _, tc := range []struct {
		name string
		p    psp.Provider
	}{{"by reference", sb}, {"by listing", listingOnly{sb}}} {
		t.Run(tc.name, func(t *testing.T) {
			c := psp.PromisesOf(tc.p)
			found, err := FindCharge(ctx, tc.p, c, ref, now)
			if err != nil || found.ID != first.ID || len(found.Others) != 1 || found.Others[0].ID != second.ID {
				t.Errorf("FindCharge = %s (others %v), %v; want %s with %s named", found.ID, found.Others, err, first.ID, second.ID)
			}
			byID := ref
			byID.ChargeID = other.ID
			byID.Reference = "order ord_b"
			if found, err := FindCharge(ctx, tc.p, c, byID, now); err != nil || found.ID != other.ID {
				t.Errorf("by the charge's id: %s, %v; want %s", found.ID, err, other.ID)
			}
			onlyDeclined := ref
			onlyDeclined.ChargeID = declined.ID
			if found, err := FindCharge(ctx, tc.p, c, onlyDeclined, now); err != nil || found.Status != psp.StatusDeclined {
				t.Errorf("a declined charge named: %+v, %v", found.Charge, err)
			}
			none := ref
			none.Reference = "order ord_none"
			if _, err := FindCharge(ctx, tc.p, c, none, now); !psp.NoChargeYet(err) {
				t.Errorf("no charge of the reference: %v, want not found", err)
			}
		})
	}
	if _, err := FindCharge(ctx, sb, psp.Capability{}, ref, now); !errors.Is(err, psp.ErrLookupUnsupported) {
		t.Errorf("a provider with no way to look: %v, want ErrLookupUnsupported", err)
	}
}
