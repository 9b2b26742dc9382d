package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/migrations"
)

// TestExistingOrdersStartTheirSequenceAtZero: an order made before migration 43 has
// event_seq 0 after it, and its next event is numbered 1.
func TestExistingOrdersStartTheirSequenceAtZero(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := migrations.NewProvider(d.DB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 42); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ExecContext(ctx, `
		INSERT INTO clients (name, secret_hash) VALUES ('old', sha256('secret'));
		INSERT INTO orders (client_id, status, amount, currency, items, captured_amount, created_at, updated_at)
		VALUES (1, 'paid', 1000, 'TRY', '[]', 1000, now(), now());`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	var before, next int64
	if err := d.GetContext(ctx, &before, `SELECT event_seq FROM orders`); err != nil || before != 0 {
		t.Fatalf("an existing order's event_seq is %d (%v), want 0", before, err)
	}
	if err := d.GetContext(ctx, &next, `SELECT next_event_sequence(id) FROM orders`); err != nil || next != 1 {
		t.Fatalf("its next event's sequence is %d (%v), want 1", next, err)
	}
}
