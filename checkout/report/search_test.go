package report

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// A kind with more matches than SearchLimit lists the newest SearchLimit and says there are
// more; a typed query searches only its kind.
func TestSearchBoundsEachKind(t *testing.T) {
	d := dbtest.New(t)
	f := seedConsole(t, d)
	for i := 0; i < SearchLimit+1; i++ {
		f.order(fixtureOrder{name: fmt.Sprint("card-", i), client: f.shop, status: "paid", amount: 777,
			at: at0.Add(time.Duration(i) * time.Minute), brand: "visa", last4: "7777"})
	}
	gs, err := Search(context.Background(), d, "7777")
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0].Kind != SearchCard || len(gs[0].Hits) != SearchLimit || !gs[0].More {
		t.Fatalf("7777: %d groups %+v, want one card group of %d with more", len(gs), gs, SearchLimit)
	}
	for i := 1; i < len(gs[0].Hits); i++ {
		if gs[0].Hits[i].At.After(gs[0].Hits[i-1].At) {
			t.Fatalf("hit %d is newer than hit %d: not newest first", i, i-1)
		}
	}
	// 7.77 in minor units is an amount: every one of them, and more.
	if gs, err := Search(context.Background(), d, "777"); err != nil || len(gs) != 1 || gs[0].Kind != SearchAmount || !gs[0].More {
		t.Fatalf("777: %+v %v, want the amount group with more", gs, err)
	}
}

// searchAmount reads an amount as a receipt writes it, or in minor units without a currency.
func TestSearchAmount(t *testing.T) {
	for _, c := range []struct {
		q        string
		amount   int64
		currency string
		ok       bool
	}{
		{"12.50", 1250, "", true},
		{"12,50", 1250, "", true},
		{"1250", 1250, "", true},
		{"12.50 TRY", 1250, "TRY", true},
		{"try 12.50", 1250, "TRY", true},
		{"12 TRY", 1200, "TRY", true},
		{"4990 JPY", 4990, "JPY", true},
		{"1.500 KWD", 1500, "KWD", true},
		{"12.505", 0, "", false},
		{"12.50 XXX", 0, "", false},
		{"TRY 12 EUR", 0, "", false},
		{"0", 0, "", false},
		{"-5", 0, "", false},
		{"99999999999999999999", 0, "", false},
		{"abc", 0, "", false},
	} {
		amount, currency, ok := searchAmount(c.q)
		if ok != c.ok || amount != c.amount || currency != c.currency {
			t.Errorf("%q: %d %q %v, want %d %q %v", c.q, amount, currency, ok, c.amount, c.currency, c.ok)
		}
	}
}
