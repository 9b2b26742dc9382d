// Package receiptstest is a real SMTP server (go-smtp's) on a loopback port that keeps the
// messages it accepts, for tests of the receipts that tekrar sends.
package receiptstest

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/tekrar/tekrar/internal/config"
)

// Mailbox is a real SMTP server (go-smtp's) on a loopback port that keeps what it accepts.
// Errors queued in fail are answered to DATA (or to RCPT, failRcpt), one per message.
type Mailbox struct {
	t        *testing.T
	Server   config.SMTPServer // what TEKRAR_SMTP_URL would say
	mu       sync.Mutex
	msgs     []Received
	got      chan struct{}
	fail     []error
	failRcpt []error
	user     string // the user that authenticated, if any
}

// Received is one accepted message.
type Received struct {
	From string
	To   []string
	Data []byte
}

// New starts the server; with user and pass set it requires AUTH PLAIN.
func New(t *testing.T, user, pass string) *Mailbox {
	t.Helper()
	mb := &Mailbox{t: t, got: make(chan struct{}, 1000)}
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &session{mb: mb, user: user, pass: pass}, nil
	}))
	s.Domain = "mail.test"
	s.AllowInsecureAuth = true
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	mb.Server = config.SMTPServer{Host: "127.0.0.1", Port: port, Username: user, Password: pass}
	return mb
}

// Messages returns the messages accepted so far.
func (mb *Mailbox) Messages() []Received {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return append([]Received(nil), mb.msgs...)
}

// FailNext answers the next DATA commands with errs, one each.
func (mb *Mailbox) FailNext(errs ...error) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.fail = append(mb.fail, errs...)
}

// FailNextRcpt answers the next RCPT commands with errs, one each.
func (mb *Mailbox) FailNextRcpt(errs ...error) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.failRcpt = append(mb.failRcpt, errs...)
}

type session struct {
	mb         *Mailbox
	user, pass string
	authed     bool
	cur        Received
}

func (s *session) AuthMechanisms() []string {
	if s.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.user || pass != s.pass {
			return errors.New("bad credentials")
		}
		s.authed = true
		s.mb.mu.Lock()
		s.mb.user = user
		s.mb.mu.Unlock()
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.user != "" && !s.authed {
		return smtp.ErrAuthRequired
	}
	s.cur = Received{From: from}
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.mb.mu.Lock()
	defer s.mb.mu.Unlock()
	if len(s.mb.failRcpt) > 0 {
		err := s.mb.failRcpt[0]
		s.mb.failRcpt = s.mb.failRcpt[1:]
		return err
	}
	s.cur.To = append(s.cur.To, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mb.mu.Lock()
	defer s.mb.mu.Unlock()
	if len(s.mb.fail) > 0 {
		err := s.mb.fail[0]
		s.mb.fail = s.mb.fail[1:]
		return err
	}
	s.cur.Data = b
	s.mb.msgs = append(s.mb.msgs, s.cur)
	select { // a wake-up for Wait; one pending is enough, and a full buffer must not stall the server
	case s.mb.got <- struct{}{}:
	default:
	}
	return nil
}

func (s *session) Reset()        { s.cur = Received{} }
func (s *session) Logout() error { return nil }

// User is the user that authenticated last, if any.
func (mb *Mailbox) User() string {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.user
}

// Wait returns once n messages have been accepted in all, or fails the test when ctx ends.
func (mb *Mailbox) Wait(ctx context.Context, n int) []Received {
	mb.t.Helper()
	for {
		if msgs := mb.Messages(); len(msgs) >= n {
			return msgs
		}
		select {
		case <-mb.got:
		case <-ctx.Done():
			mb.t.Fatalf("%d messages accepted, waited for %d", len(mb.Messages()), n)
		}
	}
}
