package hooks_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/hooks"
	"github.com/tekrar/tekrar/checkout/webhook"
)

// A client never sees, deletes or rotates another client's endpoint: it is not found.
func TestAnotherClientsEndpointIsNotFound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.client(t, "a"), f.client(t, "b")
	e := f.endpoint(t, a, "https://93.184.215.14/hooks")
	if _, err := f.store.Get(ctx, b, e.ID); !errors.Is(err, hooks.ErrEndpointNotFound) {
		t.Errorf("get: %v", err)
	}
	if _, err := f.store.RotateSecret(ctx, b, e.ID, time.Hour); !errors.Is(err, hooks.ErrEndpointNotFound) {
		t.Errorf("rotate: %v", err)
	}
	if err := f.store.Delete(ctx, b, e.ID); !errors.Is(err, hooks.ErrEndpointNotFound) {
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
	if _, err := f.store.Get(ctx, a, e.ID); !errors.Is(err, hooks.ErrEndpointNotFound) {
		t.Errorf("get after delete: %v", err)
	}
}

// The secret is stored sealed: the row holds neither the secret nor its key bytes, and a
// sealed secret moved to another endpoint's row does not open.
func TestSecretsAreSealedAtRest(t *testing.T) {
	f := newFixture(t)
	client := f.client(t, "shop")
	e := f.endpoint(t, client, "https://93.184.215.14/hooks")
	key, err := webhook.ParseSecret(e.Secret)
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
	other, _ := hooks.NewSealer(hooks.NewSecretsKey())
	if _, err := other.Open(sealed, e.InternalID); err == nil {
		t.Fatal("a sealed secret opened under another key")
	}
	noKey := &hooks.Store{DB: f.db}
	if _, err := noKey.Create(context.Background(), client, hooks.EndpointInput{URL: "https://93.184.215.14/", EventTypes: []string{"order.paid"}}); !errors.Is(err, hooks.ErrNoSecretsKey) {
		t.Fatalf("create without a secrets key: %v", err)
	}
}
