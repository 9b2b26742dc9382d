package migrations_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/migrations"
)

// TestIntentDownRefusesWhileAKeyIsUnfinished: migration 35's Down does not drop the intent
// of a key still in flight (the previous schema would derive another provider key for it
// and charge again); it refuses, and changes nothing, until the key has ended.
func TestIntentDownRefusesWhileAKeyIsUnfinished(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := d.ExecContext(ctx, `
		INSERT INTO clients (name, secret_hash) VALUES ('down', sha256('secret'));
		INSERT INTO orders (client_id, status, amount, currency, items, created_at, updated_at, intent)
		VALUES (1, 'pending', 1000, 'TRY', '[]', now(), now(), sha256('intent'));
		INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point, order_id,
		                              created_at, expires_at, intent)
		VALUES (1, 'k', sha256('x'), 'POST', '/v1/orders', 'in_progress', 'order_created', 1,
		        now(), now() + interval '1 day', sha256('intent'));`); err != nil {
		t.Fatal(err)
	}
	p, err := migrations.NewProvider(d.DB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 34); err == nil || !strings.Contains(err.Error(), "derive their provider keys from their intent") {
		t.Fatalf("down below 35 with an unfinished key: %v, want a refusal", err)
	}
	if v, err := p.GetDBVersion(ctx); err != nil || v < 35 {
		t.Fatalf("after the refusal the database is at version %d (%v), want 35 or later", v, err)
	}
	if _, err := d.ExecContext(ctx, `UPDATE idempotency_keys SET state = 'completed', recovery_point = 'finished',
		response_status = 201, response_body = '{}'`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 34); err != nil {
		t.Fatalf("down below 35 once the key completed: %v", err)
	}
	var n int
	if err := d.GetContext(ctx, &n, `SELECT count(*) FROM information_schema.columns
		WHERE column_name = 'intent' AND table_name IN ('orders', 'idempotency_keys')`); err != nil || n != 0 {
		t.Fatalf("at version 34, %d intent columns (%v), want none", n, err)
	}
}
