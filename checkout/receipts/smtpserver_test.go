package receipts

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/tekrar/tekrar/internal/config"
)

// mailbox is a real SMTP server (go-smtp's) on a loopback port that keeps what it accepts.
// Errors queued in fail are answered to DATA (or to RCPT, failRcpt), one per message.
type mailbox struct {
	t        *testing.T
	server   config.SMTPServer
	mu       sync.Mutex
	msgs     []received
	fail     []error
	failRcpt []error
	user     string // the user that authenticated, if any
}

type received struct {
	From string
	To   []string
	Data []byte
}

// newMailbox starts the server; with user and pass set it requires AUTH PLAIN.
func newMailbox(t *testing.T, user, pass string) *mailbox {
	t.Helper()
	mb := &mailbox{t: t}
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
	mb.server = config.SMTPServer{Host: "127.0.0.1", Port: port, Username: user, Password: pass}
	return mb
}

func (mb *mailbox) messages() []received {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return append([]received(nil), mb.msgs...)
}

func (mb *mailbox) failNext(errs ...error) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.fail = append(mb.fail, errs...)
}

func (mb *mailbox) failNextRcpt(errs ...error) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.failRcpt = append(mb.failRcpt, errs...)
}

type session struct {
	mb         *mailbox
	user, pass string
	authed     bool
	cur        received
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
	s.cur = received{From: from}
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
	return nil
}

func (s *session) Reset()        { s.cur = received{} }
func (s *session) Logout() error { return nil }
