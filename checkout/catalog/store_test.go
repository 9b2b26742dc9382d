package catalog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tekrar/tekrar/checkout/catalog"
	"github.com/tekrar/tekrar/internal/problem"
)

// TestPutProductOnce: the same body twice is one version and one movement; a stale
// If-Match changes nothing; a change of level is a movement of its difference; another
// client's sku is not found.
func TestPutProductOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	shop, other := f.client(t, "shop"), f.client(t, "other")
	in := catalog.ProductInput{Name: "Latte", Price: 4500, Currency: "TRY", Stock: 10}

	first, created, err := f.store.PutProduct(ctx, shop, "LATTE", in, catalog.Precondition{})
	if err != nil || !created || first.Version != 1 || first.Stock != 10 {
		t.Fatalf("first put = %+v, created %v, %v", first, created, err)
	}
	again, created, err := f.store.PutProduct(ctx, shop, "LATTE", in, catalog.Precondition{IfMatch: []string{catalog.ETag(1)}})
	if err != nil || created || again.Version != 1 {
		t.Fatalf("same body again = %+v, created %v, %v; want version 1, not created", again, created, err)
	}
	in.Stock = 7
	_, _, err = f.store.PutProduct(ctx, shop, "LATTE", in, catalog.Precondition{IfMatch: []string{catalog.ETag(2)}})
	if p, ok := errors.AsType[*problem.Problem](err); !ok || p.Code != problem.CodePreconditionFailed {
		t.Fatalf("stale If-Match: %v, want %s", err, problem.CodePreconditionFailed)
	}
	changed, _, err := f.store.PutProduct(ctx, shop, "LATTE", in, catalog.Precondition{IfMatch: []string{catalog.ETag(1)}})
	if err != nil || changed.Version != 2 || changed.Stock != 7 {
		t.Fatalf("change = %+v, %v; want version 2, stock 7", changed, err)
	}
	var deltas []int64
	if err := f.db.Select(&deltas, `
		SELECT m.delta FROM stock_movements m JOIN products p ON p.id = m.product_id
		 WHERE p.client_id = $1 AND p.sku = 'LATTE' AND m.reason = 'put' ORDER BY m.id`, shop); err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 2 || deltas[0] != 10 || deltas[1] != -3 {
		t.Errorf("movements %v, want [10 -3]", deltas)
	}
	if _, err := f.store.GetProduct(ctx, other, "LATTE"); !errors.Is(err, catalog.ErrProductNotFound) {
		t.Errorf("another client's product: %v, want not found", err)
	}
	got, err := catalog.ReadProducts(ctx, f.db, shop, []string{"LATTE", "NOPE"})
	if err != nil || len(got) != 1 || got[0].SKU != "LATTE" || got[0].Stock != 7 {
		t.Errorf("ReadProducts = %+v, %v; want LATTE at 7", got, err)
	}
}

// TestCartLifecycle: a cart put, read as an order reads it (CartItems, the stored bytes and
// the lines), replaced only with its current ETag, and deleted.
func TestCartLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	shop := f.client(t, "shop")
	lines := []catalog.Item{{SKU: "LATTE", Name: "Latte", Quantity: 2, UnitAmount: 4500, FromStock: true}}

	v, created, err := f.store.PutCart(ctx, shop, "table-4", catalog.CartInput{Items: lines}, catalog.Precondition{IfNoneMatch: []string{"*"}})
	if err != nil || !created || v.Amount != 9000 || v.Version != 1 {
		t.Fatalf("put = %+v, created %v, %v", v, created, err)
	}
	raw, items, err := catalog.CartItems(ctx, f.db, shop, "table-4")
	if err != nil || len(items) != 1 || items[0] != lines[0] || len(raw) == 0 {
		t.Fatalf("CartItems = %s, %+v, %v", raw, items, err)
	}
	if _, _, err := f.store.PutCart(ctx, shop, "table-4", catalog.CartInput{Items: nil}, catalog.Precondition{IfNoneMatch: []string{"*"}}); err == nil {
		t.Fatal("If-None-Match: * on an existing cart was applied")
	}
	if err := f.store.DeleteCart(ctx, shop, "table-4", catalog.Precondition{IfMatch: []string{catalog.ETag(2)}}); err == nil {
		t.Fatal("delete with a stale If-Match was applied")
	}
	if err := f.store.DeleteCart(ctx, shop, "table-4", catalog.Precondition{IfMatch: []string{catalog.ETag(1)}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := f.store.GetCart(ctx, shop, "table-4"); !errors.Is(err, catalog.ErrCartNotFound) {
		t.Errorf("deleted cart: %v, want not found", err)
	}
	if _, _, err := catalog.CartItems(ctx, f.db, shop, "table-4"); !errors.Is(err, catalog.ErrCartNotFound) {
		t.Errorf("CartItems of a deleted cart: %v, want not found", err)
	}
}
