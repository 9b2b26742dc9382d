package receipts

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/dbtest"
)

const testFrom = "Shop <receipts@shop.example>"

var testNow = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

type fixture struct {
	t   *testing.T
	db  *sqlx.DB
	dsn string // for a child process
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dsn := tdb.DSN(dbtest.NewURL(t))
	db, err := sqlx.Connect("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return &fixture{t: t, db: db, dsn: dsn}
}

func (f *fixture) client(name string) int64 {
	f.t.Helper()
	return checkouttest.ClientRow(f.t, f.db, name)
}

// paidOrder inserts a paid order of two lattes (90.00 TRY) by visa 4242 for email ("" for
// none) and returns its public id and id.
func (f *fixture) paidOrder(clientID int64, email string) (string, int64) {
	f.t.Helper()
	var pub string
	var id int64
	err := f.db.QueryRowx(`
		INSERT INTO orders (client_id, status, amount, currency, items, customer_email, captured_amount, created_at, updated_at)
		VALUES ($1, 'paid', 9000, 'TRY', '[{"sku":"LATTE","name":"Latte","quantity":2,"unit_amount":4500}]', NULLIF($2, ''), 9000, $3, $3)
		RETURNING public_id, id`, clientID, email, testNow).Scan(&pub, &id)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.Exec(`
		INSERT INTO payments (order_id, provider_charge_id, provider_key, amount, currency, status, card_brand, card_last4, created_at)
		VALUES ($1, 'ch_' || $3, 'pk_' || $3, 9000, 'TRY', 'succeeded', 'visa', '4242', $2)`, id, testNow, pub); err != nil {
		f.t.Fatal(err)
	}
	return pub, id
}

// refund inserts a succeeded refund of amount and returns its public id.
func (f *fixture) refund(orderID, clientID, amount int64) string {
	f.t.Helper()
	var pub string
	if err := f.db.Get(&pub, `
		INSERT INTO refunds (order_id, client_id, amount, currency, reason, status, provider_key, created_at, updated_at)
		VALUES ($1, $2, $3, 'TRY', 'customer asked', 'succeeded', 'rk_' || gen_random_uuid(), $4, $4) RETURNING public_id`,
		orderID, clientID, amount, testNow); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.Exec(`UPDATE orders SET refunded_amount = refunded_amount + $2 WHERE id = $1`, orderID, amount); err != nil {
		f.t.Fatal(err)
	}
	return pub
}

func eventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "evt_" + hex.EncodeToString(b)
}

// record runs Recorder.Record in a transaction of its own, as a dispatch would.
func (f *fixture) record(rc *Recorder, ev, kind, order, refund string) (int64, bool) {
	f.t.Helper()
	ctx := context.Background()
	tx, err := f.db.DB.BeginTx(ctx, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer tx.Rollback()
	id, queued, err := rc.Record(ctx, tx, ev, kind, order, refund)
	if err != nil {
		f.t.Fatalf("record %s: %v", ev, err)
	}
	if err := tx.Commit(); err != nil {
		f.t.Fatal(err)
	}
	return id, queued
}

func (f *fixture) row(id int64) (state string, attempts int, lastError sql.NullString, sentAt sql.NullTime) {
	f.t.Helper()
	if err := f.db.QueryRow(`SELECT state, attempts, last_error, sent_at FROM receipts WHERE id = $1`, id).
		Scan(&state, &attempts, &lastError, &sentAt); err != nil {
		f.t.Fatal(err)
	}
	return
}

func (f *fixture) count(where string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.db.Get(&n, `SELECT count(*) FROM receipts WHERE `+where, args...); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// parsed is a received message read back: its headers and its two parts, decoded.
type parsed struct {
	Header     mail.Header
	Text, HTML string
}

func parse(t *testing.T, data []byte) parsed {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("read message: %v\n%s", err, data)
	}
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q: %v", m.Header.Get("Content-Type"), err)
	}
	p := parsed{Header: m.Header}
	r := multipart.NewReader(m.Body, params["boundary"])
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(part)
		if err != nil {
			t.Fatal(err)
		}
		switch part.Header.Get("Content-Type") {
		case "text/plain; charset=utf-8":
			p.Text = string(b)
		case "text/html; charset=utf-8":
			p.HTML = string(b)
		default:
			t.Fatalf("unexpected part %q", part.Header.Get("Content-Type"))
		}
	}
	return p
}
