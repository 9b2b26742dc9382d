package psp

import (
	"fmt"
	"testing"
	"time"
)

// TestListChargesPagesTheWindow walks a window page by page, in process and over HTTP: every
// charge created in [since, until) comes once, oldest first, canceled keys included, and
// nothing outside the window.
func TestListChargesPagesTheWindow(t *testing.T) {
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		ctx := testContext(t)
		var made []Charge
		for i := range 7 {
			made = append(made, mustCharge(t, p, visaCharge(fmt.Sprintf("l%d", i), int64(100+i))))
		}
		canceled, err := p.CancelCharge(ctx, "l-canceled")
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, canceled)
		// The window leaves out the first charge and takes everything after it.
		since, until := made[1].Created, made[len(made)-1].Created.Add(time.Second)
		for _, limit := range []int{1, 2, 3, 100} {
			var got []Charge
			q := ChargeListQuery{Since: since, Until: until, Limit: limit}
			for pages := 0; ; pages++ {
				if pages > len(made) {
					t.Fatalf("limit %d: the pages never end", limit)
				}
				page, err := p.ListCharges(ctx, q)
				if err != nil {
					t.Fatalf("limit %d: %v", limit, err)
				}
				if len(page.Charges) > limit {
					t.Fatalf("limit %d: a page of %d", limit, len(page.Charges))
				}
				got = append(got, page.Charges...)
				if page.Next == "" {
					break
				}
				q.After = page.Next
			}
			want := made[1:]
			if len(got) != len(want) {
				t.Fatalf("limit %d: listed %d charges, want %d: %+v", limit, len(got), len(want), got)
			}
			for i := range want {
				if !sameCharge(got[i], want[i]) {
					t.Errorf("limit %d: charge %d is %+v, want %+v", limit, i, got[i], want[i])
				}
			}
		}
		if made[1].Description != "test order" {
			t.Errorf("a charge's description is %q, want the request's", made[1].Description)
		}
	})
}
