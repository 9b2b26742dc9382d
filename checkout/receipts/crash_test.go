package receipts

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"

	_ "github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout/receipts/receiptstest"
	"github.com/tekrar/tekrar/internal/config"
)

// The child process of TestResendAfterTheProcessDies: it sends one receipt and exits with
// code 3 the moment the SMTP server has accepted it, before anything records that.
const (
	crashEnvDSN     = "TEKRAR_RECEIPTS_CRASH_DSN"
	crashEnvPort    = "TEKRAR_RECEIPTS_CRASH_SMTP_PORT"
	crashEnvReceipt = "TEKRAR_RECEIPTS_CRASH_RECEIPT"
	crashExitCode   = 3
)

func TestCrashChild(t *testing.T) {
	dsn := os.Getenv(crashEnvDSN)
	if dsn == "" {
		t.Skip("the child process of TestResendAfterTheProcessDies")
	}
	port, _ := strconv.Atoi(os.Getenv(crashEnvPort))
	id, _ := strconv.ParseInt(os.Getenv(crashEnvReceipt), 10, 64)
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	s := &Sender{DB: db, Mailer: &Mailer{Server: config.SMTPServer{Host: "127.0.0.1", Port: port}, From: testFrom},
		afterAccepted: func() error { os.Exit(crashExitCode); return nil }}
	err = s.Deliver(context.Background(), id, false)
	t.Fatalf("the child did not die after the message was accepted: %v", err)
}

// TestResendAfterTheProcessDies: a process sends a receipt and dies (exits) right after the
// SMTP server accepted it; the retry in another process sends it again, with the same
// Message-ID and the same bytes, and records it sent once, with both attempts counted.
func TestResendAfterTheProcessDies(t *testing.T) {
	f := newFixture(t)
	mb := receiptstest.New(t, "", "")
	order, _ := f.paidOrder(f.client("Shop"), "bob@example.com")
	ev := eventID()
	id, _ := f.record(sending, ev, KindPaid, order, "")

	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvDSN+"="+f.dsn, crashEnvPort+"="+strconv.Itoa(mb.Server.Port),
		crashEnvReceipt+"="+strconv.FormatInt(id, 10))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != crashExitCode {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if state, attempts, _, _ := f.row(id); state != StateQueued || attempts != 1 || len(mb.Messages()) != 1 {
		t.Fatalf("after the child died: %s, %d attempts, %d messages", state, attempts, len(mb.Messages()))
	}

	if err := sender(f, mb).Deliver(context.Background(), id, false); err != nil {
		t.Fatal(err)
	}
	msgs := mb.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	a, b := parse(t, msgs[0].Data).Header.Get("Message-ID"), parse(t, msgs[1].Data).Header.Get("Message-ID")
	if a != "<"+ev+".receipt@shop.example>" || a != b || !bytes.Equal(msgs[0].Data, msgs[1].Data) {
		t.Errorf("Message-IDs %q and %q; same bytes: %v", a, b, bytes.Equal(msgs[0].Data, msgs[1].Data))
	}
	state, attempts, _, sentAt := f.row(id)
	if state != StateSent || attempts != 2 || !sentAt.Valid {
		t.Errorf("row: %s, %d attempts, sent_at %v", state, attempts, sentAt)
	}
}
