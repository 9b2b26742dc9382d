package receipts

import (
	"bytes"
	"context"
	"errors"
	"mime"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/receipts/receiptstest"
)

func sender(f *fixture, mb *receiptstest.Mailbox) *Sender {
	return &Sender{DB: f.db.DB, Mailer: &Mailer{Server: mb.Server, From: testFrom}, Now: func() time.Time { return testNow }}
}

var sending = &Recorder{From: testFrom, Send: true, Now: func() time.Time { return testNow }}

// TestPaidOrderSendsOneReceipt: an order.paid event makes one receipt, sent once, with the
// Message-ID derived from the event, to the customer, saying the amount; the event handled
// again (a dispatch run twice) and the job run again change nothing.
func TestPaidOrderSendsOneReceipt(t *testing.T) {
	f := newFixture(t)
	mb := receiptstest.New(t, "", "")
	order, _ := f.paidOrder(f.client("Kahve Dükkanı"), "ayse@example.com")
	ev := eventID()

	id, queued := f.record(sending, ev, KindPaid, order, "")
	if id == 0 || !queued {
		t.Fatalf("record: id %d queued %v", id, queued)
	}
	if again, _ := f.record(sending, ev, KindPaid, order, ""); again != 0 {
		t.Fatalf("the event handled again made receipt %d", again)
	}
	s := sender(f, mb)
	for range 2 {
		if err := s.Deliver(context.Background(), id, false); err != nil {
			t.Fatal(err)
		}
	}
	msgs := mb.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := parse(t, msgs[0].Data)
	if got, want := m.Header.Get("Message-ID"), "<"+ev+".receipt@shop.example>"; got != want {
		t.Errorf("Message-ID %q, want %q", got, want)
	}
	if got := m.Header.Get("To"); got != "<ayse@example.com>" || len(msgs[0].To) != 1 || msgs[0].To[0] != "ayse@example.com" {
		t.Errorf("To %q, RCPT %v", got, msgs[0].To)
	}
	if msgs[0].From != "receipts@shop.example" {
		t.Errorf("MAIL FROM %q", msgs[0].From)
	}
	subject, err := new(mimeDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil || subject != "Receipt from Kahve Dükkanı" {
		t.Errorf("Subject %q (%v)", subject, err)
	}
	for _, part := range []string{m.Text, m.HTML} {
		if !strings.Contains(part, "90.00 TRY") || !strings.Contains(part, order) || !strings.Contains(part, "4242") {
			t.Errorf("a part lacks the amount, the order or the card:\n%s", part)
		}
	}
	if m.Header.Get("Date") == "" {
		t.Error("no Date")
	}
	state, attempts, _, sentAt := f.row(id)
	if state != StateSent || attempts != 1 || !sentAt.Valid {
		t.Errorf("row: %s, %d attempts, sent_at %v", state, attempts, sentAt)
	}
	if n := f.count(`event_id = $1`, ev); n != 1 {
		t.Errorf("%d receipts for the event", n)
	}
}

// TestResendAfterCrashHasTheSameMessageID: the SMTP server accepted the message, the process
// died before recording it; the job's retry sends it again, and the second message is the
// first one byte for byte, Message-ID included, and the receipt is recorded sent once.
func TestResendAfterCrashHasTheSameMessageID(t *testing.T) {
	f := newFixture(t)
	mb := receiptstest.New(t, "", "")
	order, _ := f.paidOrder(f.client("Shop"), "bob@example.com")
	ev := eventID()
	id, _ := f.record(sending, ev, KindPaid, order, "")

	s := sender(f, mb)
	died := errors.New("process died")
	s.afterAccepted = func() error { return died }
	if err := s.Deliver(context.Background(), id, false); !errors.Is(err, died) {
		t.Fatalf("first attempt: %v", err)
	}
	if state, _, _, _ := f.row(id); state != StateQueued {
		t.Fatalf("after the crash the receipt is %s", state)
	}
	s.afterAccepted = nil
	if err := s.Deliver(context.Background(), id, false); err != nil {
		t.Fatal(err)
	}
	msgs := mb.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2 (the send, and the resend)", len(msgs))
	}
	a, b := parse(t, msgs[0].Data), parse(t, msgs[1].Data)
	if a.Header.Get("Message-ID") != b.Header.Get("Message-ID") || a.Header.Get("Message-ID") != "<"+ev+".receipt@shop.example>" {
		t.Errorf("Message-IDs %q and %q", a.Header.Get("Message-ID"), b.Header.Get("Message-ID"))
	}
	if !bytes.Equal(msgs[0].Data, msgs[1].Data) {
		t.Errorf("the resend differs from the first send")
	}
	state, attempts, _, sentAt := f.row(id)
	if state != StateSent || attempts != 2 || !sentAt.Valid || !sentAt.Time.Equal(testNow) {
		t.Errorf("row: %s, %d attempts, sent_at %v", state, attempts, sentAt)
	}
}

// TestSMTPFailuresAreRetried: a refusal (temporary or not) fails the attempt, which River
// retries; the reason and the attempts are recorded, and the retry sends. A recipient
// refused for good, or the job's last attempt failing, makes the receipt failed.
func TestSMTPFailuresAreRetried(t *testing.T) {
	for _, tc := range []struct {
		name      string
		data      *smtp.SMTPError
		rcpt      *smtp.SMTPError
		final     bool
		wantState string
		cancel    bool
	}{
		{name: "4xx then sent", data: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}, wantState: StateSent},
		{name: "5xx on DATA then sent", data: &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 3, 0}, Message: "relay busted"}, wantState: StateSent},
		{name: "last attempt fails", data: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}, final: true, wantState: StateFailed},
		{name: "recipient refused", rcpt: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}, wantState: StateFailed, cancel: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			mb := receiptstest.New(t, "", "")
			order, _ := f.paidOrder(f.client("Shop"), "carol@example.com")
			id, _ := f.record(sending, eventID(), KindPaid, order, "")
			if tc.data != nil {
				mb.FailNext(tc.data)
			}
			if tc.rcpt != nil {
				mb.FailNextRcpt(tc.rcpt)
			}
			s := sender(f, mb)
			err := s.Deliver(context.Background(), id, tc.final)
			if err == nil {
				t.Fatal("the refused attempt returned no error: River would not retry it")
			}
			if strings.Contains(err.Error(), "carol@") || strings.Contains(err.Error(), "later") {
				t.Errorf("the job's error quotes the server or the address: %v", err)
			}
			var cancel *river.JobCancelError
			if errors.As(err, &cancel) != tc.cancel {
				t.Errorf("job cancelled: %v, want %v (%v)", !tc.cancel, tc.cancel, err)
			}
			state, attempts, lastErr, _ := f.row(id)
			wantCode := "451"
			if tc.data != nil {
				wantCode = strings.Fields(tc.data.Error())[0]
			} else {
				wantCode = "550"
			}
			if attempts != 1 || !strings.Contains(lastErr.String, wantCode) {
				t.Errorf("after the refusal: %s, %d attempts, last error %q", state, attempts, lastErr.String)
			}
			if err := s.Deliver(context.Background(), id, false); err != nil {
				t.Fatal(err)
			}
			state, attempts, _, sentAt := f.row(id)
			wantMsgs, wantAttempts := 1, 2
			if tc.wantState == StateFailed {
				wantMsgs, wantAttempts = 0, 1
			}
			if state != tc.wantState || attempts != wantAttempts || sentAt.Valid != (tc.wantState == StateSent) || len(mb.Messages()) != wantMsgs {
				t.Errorf("end: %s, %d attempts, sent_at %v, %d messages", state, attempts, sentAt, len(mb.Messages()))
			}
		})
	}
}

// TestWithoutSMTPTheReceiptIsKept: no SMTP server configured, the receipt is rendered and
// stored as kept (not queued, not dropped).
func TestWithoutSMTPTheReceiptIsKept(t *testing.T) {
	f := newFixture(t)
	order, _ := f.paidOrder(f.client("Shop"), "dave@example.com")
	keeping := &Recorder{From: testFrom, Now: func() time.Time { return testNow }}
	id, queued := f.record(keeping, eventID(), KindPaid, order, "")
	if id == 0 || queued {
		t.Fatalf("id %d queued %v", id, queued)
	}
	var state, text, html string
	if err := f.db.QueryRow(`SELECT state, body_text, body_html FROM receipts WHERE id = $1`, id).Scan(&state, &text, &html); err != nil {
		t.Fatal(err)
	}
	if state != StateKept || !strings.Contains(text, "90.00 TRY") || !strings.Contains(html, "90.00 TRY") {
		t.Errorf("%s\n%s\n%s", state, text, html)
	}
}

// TestNoEmailNoReceipt: an order without a customer e-mail gets no receipt row.
func TestNoEmailNoReceipt(t *testing.T) {
	f := newFixture(t)
	order, _ := f.paidOrder(f.client("Shop"), "")
	if id, _ := f.record(sending, eventID(), KindPaid, order, ""); id != 0 {
		t.Fatalf("receipt %d for an order with no e-mail", id)
	}
	if n := f.count(`true`); n != 0 {
		t.Fatalf("%d receipts", n)
	}
}

// TestRefundReceipt: order.refunded sends a refund receipt naming the refund's amount.
func TestRefundReceipt(t *testing.T) {
	f := newFixture(t)
	mb := receiptstest.New(t, "", "")
	client := f.client("Shop")
	order, oid := f.paidOrder(client, "erin@example.com")
	rf := f.refund(oid, client, 4500)
	id, _ := f.record(sending, eventID(), KindRefunded, order, rf)
	if err := sender(f, mb).Deliver(context.Background(), id, false); err != nil {
		t.Fatal(err)
	}
	msgs := mb.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := parse(t, msgs[0].Data)
	if !strings.Contains(m.Text, "refunded 45.00 TRY") || !strings.Contains(m.Text, rf) || !strings.Contains(m.HTML, "45.00 TRY") {
		t.Errorf("refund receipt:\n%s", m.Text)
	}
}

// TestHeaderInjectionIsRefused: a client name with a line break cannot add a header (it is
// encoded into the Subject), and a customer e-mail with one, or one that is not an ordinary
// mailbox (an address literal, localhost, % routing: stored before the API refused them), is
// not sent to at all.
func TestHeaderInjectionIsRefused(t *testing.T) {
	f := newFixture(t)
	mb := receiptstest.New(t, "", "")
	order, _ := f.paidOrder(f.client("Shop\r\nBcc: evil@attacker.example"), "frank@example.com")
	id, _ := f.record(sending, eventID(), KindPaid, order, "")
	if err := sender(f, mb).Deliver(context.Background(), id, false); err != nil {
		t.Fatal(err)
	}
	msgs := mb.Messages()
	if len(msgs) != 1 || len(msgs[0].To) != 1 {
		t.Fatalf("messages %+v", msgs)
	}
	m := parse(t, msgs[0].Data)
	if len(m.Header["Bcc"]) != 0 {
		t.Errorf("the client name added a Bcc header: %q", m.Header["Bcc"])
	}
	head, _, _ := bytes.Cut(msgs[0].Data, []byte("\r\n\r\n"))
	if bytes.Contains(head, []byte("\nBcc")) {
		t.Errorf("a Bcc line in the headers:\n%s", head)
	}

	for _, email := range []string{"gina@example.com\r\nBcc: evil@attacker.example", "a@example.com, b@example.com", "Gina <gina@example.com>",
		"a@[10.0.0.1]", "a@localhost", "a%b@x"} {
		order, _ := f.paidOrder(f.client("Shop "+email), email)
		id, queued := f.record(sending, eventID(), KindPaid, order, "")
		state, _, lastErr, _ := f.row(id)
		if queued || state != StateFailed || lastErr.String == "" {
			t.Errorf("%q: queued %v, state %s, last error %q", email, queued, state, lastErr.String)
		}
		if err := sender(f, mb).Deliver(context.Background(), id, false); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(mb.Messages()); n != 1 {
		t.Errorf("%d messages: a bad address was sent to", n)
	}
	if _, err := buildMessage(Receipt{Recipient: "x@example.com\nBcc: y@example.com", MessageID: "<evt_1.receipt@shop.example>"}, testFrom); err == nil {
		t.Error("buildMessage took a recipient with a line break")
	}
}

// TestCredentialsAreUsed: the URL's user and password authenticate (AUTH PLAIN; the test
// server is on loopback, where clear text is allowed).
func TestCredentialsAreUsed(t *testing.T) {
	f := newFixture(t)
	mb := receiptstest.New(t, "shop", "s3cret")
	order, _ := f.paidOrder(f.client("Shop"), "hale@example.com")
	id, _ := f.record(sending, eventID(), KindPaid, order, "")
	if err := sender(f, mb).Deliver(context.Background(), id, false); err != nil {
		t.Fatal(err)
	}
	if len(mb.Messages()) != 1 || mb.User() != "shop" {
		t.Fatalf("%d messages, authenticated as %q", len(mb.Messages()), mb.User())
	}
}

type mimeDecoder = mime.WordDecoder
