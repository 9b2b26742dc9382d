package report

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
)

func testGetKey(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	d, err := GetKey(ctx, f.db, f.shop, "k-a1")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != f.keys["k-a1"] || d.State != checkout.StateCompleted || d.Replays != 3 || d.Tombstone != nil ||
		d.Fingerprint != hex.EncodeToString(sha("k-a1")) || d.CompletedAt == nil || !d.CompletedAt.Equal(at0.Add(time.Second)) ||
		d.ResponseHeaders["Content-Type"] != "application/json" ||
		string(d.ResponseBody) != fmt.Sprintf(`{"id":%d}`, f.orders["a1"]) {
		t.Errorf("GetKey(k-a1) = %+v", d)
	}
	o := d.Order
	if o == nil || o.ID != f.orders["a1"] || o.Status != "paid" || o.Amount != 4500 || o.RefundedAmount != 1000 ||
		o.CustomerID != "cus_A" || o.CustomerEmail != "Ayse@Example.com" || !slices.Equal(o.Keys, []string{"k-a1"}) ||
		o.Payment == nil || o.Payment.ChargeID != fmt.Sprint("ch_", o.ID) || o.Payment.Status != "succeeded" ||
		o.Payment.CardBrand != "visa" || o.Payment.CardLast4 != "4242" {
		t.Fatalf("GetKey(k-a1).Order = %+v", o)
	}
	var items []checkout.Item
	if err := json.Unmarshal(o.Items, &items); err != nil || len(items) != 1 || items[0].SKU != "LATTE" {
		t.Errorf("items %s: %v", o.Items, err)
	}
	if len(d.Refunds) != 2 || d.Refunds[0].Key != "k-r1" || d.Refunds[0].Amount != 1000 || d.Refunds[0].Status != "succeeded" ||
		d.Refunds[0].ProviderRefundID != "re_1" || d.Refunds[0].Reason != "damaged" ||
		d.Refunds[1].Key != "k-r2" || d.Refunds[1].Status != "pending" {
		t.Errorf("GetKey(k-a1).Refunds = %+v", d.Refunds)
	}

	// A refund key leads to the order it refunds.
	d, err = GetKey(ctx, f.db, f.shop, "k-r1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Order == nil || d.Order.ID != f.orders["a1"] || len(d.Refunds) != 2 {
		t.Errorf("GetKey(k-r1) = %+v", d)
	}

	// Swept: the tombstone, in state expired, with its order.
	d, err = GetKey(ctx, f.db, f.shop, "k-swept")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != 0 || d.State != checkout.KeyStateExpired || d.Tombstone == nil || d.Tombstone.KeyID != nil ||
		!d.Tombstone.ExpiredAt.Equal(at0.Add(-24*time.Hour)) || !d.CreatedAt.Equal(at0.Add(-48*time.Hour)) ||
		d.Fingerprint != hex.EncodeToString(sha("k-swept")) || d.Order == nil || d.Order.ID != f.orders["d1"] ||
		!slices.Equal(d.Order.Keys, []string{"k-swept"}) {
		t.Errorf("GetKey(k-swept) = %+v", d)
	}
	// Being swept: the row, and its tombstone.
	d, err = GetKey(ctx, f.db, f.shop, "k-settle")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != f.keys["k-settle"] || d.State != checkout.StateCompleted || d.Tombstone == nil || d.Tombstone.KeyID == nil ||
		*d.Tombstone.KeyID != d.ID || !slices.Equal(d.Order.Keys, []string{"k-settle"}) {
		t.Errorf("GetKey(k-settle) = %+v", d)
	}
	// Used again after an earlier incarnation's tombstone: that tombstone is not this row's.
	d, err = GetKey(ctx, f.db, f.shop, "same-key")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != f.keys["same-key"] || d.Tombstone != nil || d.Order.ID != f.orders["sk2"] {
		t.Errorf("GetKey(same-key) = %+v", d)
	}
	// Needing attention, no payment yet.
	d, err = GetKey(ctx, f.db, f.shop, "k-c1")
	if err != nil {
		t.Fatal(err)
	}
	if d.State != checkout.StateNeedsAttention || d.AttentionReason != "provider outcome unknown" || d.ResponseBody != nil ||
		d.Order == nil || d.Order.Payment != nil || d.Order.Status != "pending" {
		t.Errorf("GetKey(k-c1) = %+v", d)
	}
	for _, k := range []struct {
		client int64
		key    string
	}{{f.shop, "nope"}, {f.pos, "k-a1"}, {f.idle, "dup"}} {
		if _, err := GetKey(ctx, f.db, k.client, k.key); !errors.Is(err, checkout.ErrKeyNotFound) {
			t.Errorf("GetKey(%d, %s): err %v, want checkout.ErrKeyNotFound", k.client, k.key, err)
		}
	}
}
