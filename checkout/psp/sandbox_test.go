package psp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/tekrar/tekrar/checkout/stdwebhook"
)

// TestTokenNeverStored looks through every column of the sandbox's tables (its events,
// disputes and saved cards included) for a card token, as text, as raw bytes and hex-encoded.
func TestTokenNeverStored(t *testing.T) {
	hooks := &WebhookOptions{URL: "http://127.0.0.1:1/unused", Secret: stdwebhook.NewSecret()}
	forEachProvider(t, SandboxOptions{Webhooks: hooks}, func(t *testing.T, p Provider, sb *Sandbox) {
		c := mustCharge(t, p, visaCharge("order-7", 900))
		if _, err := p.Refund(testContext(t), RefundRequest{Key: "refund-7", ChargeID: c.ID, Amount: 100}); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.OpenDispute(testContext(t), c.ID, 800, "fraudulent"); err != nil {
			t.Fatal(err)
		}
		mustCharge(t, p, ChargeRequest{Key: "order-8", Amount: 50, Currency: "EUR", CardToken: TokenDeclined})
		if _, err := sb.SavePaymentMethod(testContext(t), "cus_7", TokenVisa); err != nil {
			t.Fatal(err)
		}

		ctx := testContext(t)
		var tables []string
		if err := sb.db.SelectContext(ctx, &tables,
			`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE 'psp\_%' ORDER BY 1`); err != nil {
			t.Fatal(err)
		}
		if len(tables) != 5 {
			t.Fatalf("psp tables = %v, want psp_charges, psp_disputes, psp_events, psp_payment_methods and psp_refunds", tables)
		}
		token := TokenVisa
		hexToken := hex.EncodeToString([]byte(token))
		for _, table := range tables {
			var columns []struct {
				Name string `db:"column_name"`
				Type string `db:"data_type"`
			}
			if err := sb.db.SelectContext(ctx, &columns,
				`SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1`, table); err != nil {
				t.Fatal(err)
			}
			var rows int
			if err := sb.db.GetContext(ctx, &rows, `SELECT count(*) FROM `+table); err != nil || rows == 0 {
				t.Fatalf("%s has %d rows (%v): the test would prove nothing", table, rows, err)
			}
			for _, col := range columns {
				cond := `position($1 in ` + col.Name + `::text) > 0 OR position($2 in ` + col.Name + `::text) > 0`
				args := []any{token, hexToken}
				if col.Type == "bytea" {
					cond = `position(convert_to($1, 'UTF8') in ` + col.Name + `) > 0`
					args = []any{token}
				}
				var n int
				if err := sb.db.GetContext(ctx, &n, `SELECT count(*) FROM `+table+` WHERE `+cond, args...); err != nil {
					t.Fatalf("%s.%s: %v", table, col.Name, err)
				}
				if n != 0 {
					t.Errorf("%s.%s holds the card token in %d rows", table, col.Name, n)
				}
			}
		}

		// What is stored is the token's SHA-256, so that a reused key with another card is
		// recognised.
		var fp []byte
		if err := sb.db.GetContext(ctx, &fp, `SELECT card_token_fingerprint FROM psp_charges WHERE id = $1`, c.ID); err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256([]byte(token))
		if !bytes.Equal(fp, want[:]) {
			t.Errorf("fingerprint = %x, want sha256 of the token", fp)
		}
	})
}

func TestSandboxDefaults(t *testing.T) {
	sb := NewSandbox(nil, SandboxOptions{})
	if sb.slow.Seconds() != 2 || sb.now == nil {
		t.Errorf("defaults: slow %s, now set %v; want 2s and time.Now", sb.slow, sb.now != nil)
	}
}
