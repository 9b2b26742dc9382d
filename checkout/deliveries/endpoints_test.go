package deliveries_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
)

// A client never sees, deletes or rotates another client's endpoint: it is not found.
func TestAnotherClientsEndpointIsNotFound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.client(t, "a"), f.client(t, "b")
	e := f.endpoint(t, a, "https://93.184.215.14/hooks")
	if _, err := f.store.Get(ctx, b, e.ID); !errors.Is(err, deliveries.ErrEndpointNotFound) {
		t.Errorf("get: %v", err)
	}
	if _, err := f.store.RotateSecret(ctx, b, e.ID, time.Hour); !errors.Is(err, deliveries.ErrEndpointNotFound) {
		t.Errorf("rotate: %v", err)
	}
	if err := f.store.Delete(ctx, b, e.ID); !errors.Is(err, deliveries.ErrEndpointNotFound) {
		t.Errorf("delete: %v", err)
	}
	if l, err := f.store.List(ctx, b); err != nil || len(l) != 0 {
		t.Errorf("b's list: %v %v", l, err)
	}
	if l, err := f.store.List(ctx, a); err != nil || len(l) != 1 || l[0].ID != e.ID || l[0].Secret != "" {
		t.Errorf("a's list: %+v %v", l, err)
	}
	if err := f.store.Delete(ctx, a, e.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Get(ctx, a, e.ID); !errors.Is(err, deliveries.ErrEndpointNotFound) {
		t.Errorf("get after delete: %v", err)
	}
}

// The secret is stored sealed: the row holds neither the secret nor its key bytes, and a
// sealed secret moved to another endpoint's row does not open.
func TestSecretsAreSealedAtRest(t *testing.T) {
	f := newFixture(t)
	client := f.client(t, "shop")
	e := f.endpoint(t, client, "https://93.184.215.14/hooks")
	key, err := stdwebhook.ParseSecret(e.Secret)
	if err != nil {
		t.Fatal(err)
	}
	var sealed []byte
	if err := f.db.Get(&sealed, `SELECT sealed FROM webhook_endpoint_secrets`); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, key) || bytes.Contains(sealed, []byte(e.Secret[6:])) {
		t.Fatal("the secret is stored in clear")
	}
	if _, err := f.store.Sealer.Open(sealed, e.InternalID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Sealer.Open(sealed, e.InternalID+1); err == nil {
		t.Fatal("a sealed secret opened for another endpoint")
	}
	other, _ := deliveries.NewSealer(deliveries.NewSecretsKey())
	if _, err := other.Open(sealed, e.InternalID); err == nil {
		t.Fatal("a sealed secret opened under another key")
	}
	noKey := &deliveries.Store{DB: f.db}
	if _, err := noKey.Create(context.Background(), client, deliveries.EndpointInput{URL: "https://93.184.215.14/", EventTypes: []string{"order.paid"}}); !errors.Is(err, deliveries.ErrNoSecretsKey) {
		t.Fatalf("create without a secrets key: %v", err)
	}
}

// TestEndpointsSubscribeToEveryOutboxType: an endpoint may list any type of the outbox (the
// installment ones too), and an event fans out only to the endpoints that list its type.
func TestEndpointsSubscribeToEveryOutboxType(t *testing.T) {
	f := newFixture(t)
	client := f.client(t, "shop")
	all := f.endpoint(t, client, "https://93.184.215.14/all", outbox.Types...)
	cards := f.endpoint(t, client, "https://93.184.215.14/cards", outbox.InstallmentDeclined, outbox.InstallmentNeedsAttention)
	for i, typ := range outbox.Types {
		f.event(t, client, typ, i)
	}
	for _, tc := range []struct {
		e    deliveries.Endpoint
		want []string
	}{
		{all, outbox.Types},
		{cards, []string{outbox.InstallmentDeclined, outbox.InstallmentNeedsAttention}},
	} {
		var got []string
		if err := f.db.Select(&got, `SELECT d.event_type FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
			 WHERE w.public_id = $1 ORDER BY d.id`, tc.e.ID); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("endpoint %s got deliveries of %v, want %v", tc.e.URL, got, tc.want)
		}
	}
}
