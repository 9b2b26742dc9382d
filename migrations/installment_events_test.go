package migrations_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/migrations"
)

// TestInstallmentEventsDownRefusesWhileTheyExist: migration 33's Down does not erase
// events clients were told of; it refuses, and changes nothing, until they are deleted.
func TestInstallmentEventsDownRefusesWhileTheyExist(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := d.ExecContext(ctx, `
		INSERT INTO clients (name, secret_hash) VALUES ('down', sha256('secret'));
		INSERT INTO outbox_events (client_id, type, payload) VALUES (1, 'installment.paid', '{"order":"x"}');`); err != nil {
		t.Fatal(err)
	}
	p, err := migrations.NewProvider(d.DB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 32); err == nil || !strings.Contains(err.Error(), "installment events or receipts exist") {
		t.Fatalf("down below 33 with an installment event: %v, want a refusal", err)
	}
	if v, err := p.GetDBVersion(ctx); err != nil || v < 33 {
		t.Fatalf("after the refusal the database is at version %d (%v), want 33 or later", v, err)
	}
	var n int
	if err := d.GetContext(ctx, &n, `SELECT count(*) FROM outbox_events WHERE type = 'installment.paid'`); err != nil || n != 1 {
		t.Fatalf("after the refusal %d installment events (%v), want 1", n, err)
	}
	if _, err := d.ExecContext(ctx, `DELETE FROM outbox_events`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 32); err != nil {
		t.Fatalf("down below 33 without installment events: %v", err)
	}
	if _, err := d.ExecContext(ctx, `INSERT INTO outbox_events (client_id, type, payload) VALUES (1, 'installment.paid', '{"order":"x"}')`); err == nil {
		t.Error("at version 32 the database accepts an installment.paid event")
	}
}
