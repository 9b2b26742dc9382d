package stdwebhook_test

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// receiver is docs/webhooks-out.md's Go snippet: the block there is this function's body,
// line for line (docs/snippets_test.go checks), so that what merchants copy is compiled and
// run (TestDocsReceiverAppliesOnce).
func receiver(db *sql.DB, applyEvent func(tx *sql.Tx, body []byte) error) (*http.ServeMux, error) {
	key, err := stdwebhook.ParseSecret(os.Getenv("TEKRAR_WEBHOOK_SECRET")) // whsec_...
	if err != nil {
		return nil, err
	}
	verifier := stdwebhook.Verifier{Keys: []stdwebhook.Key{key}} // two keys while you rotate
	// once: db.Exec(stdwebhook.ReceiptsTable)

	mux := http.NewServeMux()
	mux.HandleFunc("/tekrar-webhooks", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		msg, err := verifier.Verify(r.Header, body)
		if err != nil {
			http.Error(w, "bad signature", http.StatusBadRequest) // not from tekrar: not retried usefully
			return
		}
		_, err = stdwebhook.Receive(r.Context(), db, msg, func(tx *sql.Tx) error {
			return applyEvent(tx, body) // your effect, in the same transaction as the receipt
		})
		if err != nil {
			http.Error(w, "try again", http.StatusInternalServerError) // tekrar retries
			return
		}
		w.WriteHeader(http.StatusNoContent) // a duplicate is answered 2xx too: it was applied before
	})
	return mux, nil
}

// TestDocsReceiverAppliesOnce runs docs/webhooks-out.md's receiver on a real Postgres: a
// signed event delivered twice is applied once and answered 204 both times; a message signed
// under another secret is refused and applies nothing.
func TestDocsReceiverAppliesOnce(t *testing.T) {
	secret := stdwebhook.NewSecret()
	t.Setenv("TEKRAR_WEBHOOK_SECRET", secret)
	d := dbtest.New(t).DB
	ctx := context.Background()
	for _, s := range []string{stdwebhook.ReceiptsTable, `CREATE TABLE events (body text NOT NULL)`} {
		if _, err := d.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	mux, err := receiver(d, func(tx *sql.Tx, body []byte) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO events VALUES ($1)`, string(body))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	key, _ := stdwebhook.ParseSecret(secret)
	other, _ := stdwebhook.ParseSecret(stdwebhook.NewSecret())
	deliver := func(k stdwebhook.Key, id string) int {
		t.Helper()
		body := []byte(`{"type":"order.paid","data":{"id":"ord_1"}}`)
		req, _ := http.NewRequest("POST", srv.URL+"/tekrar-webhooks", bytes.NewReader(body))
		for name, v := range stdwebhook.Headers(id, time.Now(), body, k) {
			req.Header[name] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 2 {
		if code := deliver(key, "evt_1"); code != http.StatusNoContent {
			t.Errorf("delivery %d: %d, want 204", i+1, code)
		}
	}
	if code := deliver(other, "evt_2"); code != http.StatusBadRequest {
		t.Errorf("another secret's signature: %d, want 400", code)
	}
	var n int
	if err := d.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d events applied (%v), want 1", n, err)
	}
}
