package receipts

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/tekrar/tekrar/internal/config"
)

// Mailer hands messages to one SMTP server.
type Mailer struct {
	Server config.SMTPServer
	// From is the From address; its bare address is the envelope sender.
	From string
	// LocalName is what EHLO says; empty: "localhost".
	LocalName string
	// TLS is the TLS configuration for STARTTLS and smtps (nil: the system's roots, the
	// server's host name).
	TLS *tls.Config
	// Timeout bounds one delivery; 0: one minute.
	Timeout time.Duration
}

// errCredentialsInClear: the server offers no TLS, and the URL has credentials that would
// cross the network in clear text.
var errCredentialsInClear = errors.New("smtp: the server offers no STARTTLS; credentials are sent only over TLS or to a loopback server")

// Send delivers msg to one recipient: it connects (TLS for smtps://, STARTTLS when the
// server offers it for smtp://), authenticates when the URL has credentials, and sends.
// An SMTP refusal is returned as *smtp.SMTPError.
func (m *Mailer) Send(ctx context.Context, to string, msg []byte) error {
	timeout := m.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return fmt.Errorf("from address: %w", err)
	}
	c, tlsOn, err := m.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if m.Server.Username != "" {
		if !tlsOn && !isLoopback(m.Server.Host) {
			return errCredentialsInClear
		}
		if err := c.Auth(sasl.NewPlainClient("", m.Server.Username, m.Server.Password)); err != nil {
			return fmt.Errorf("smtp auth: %w", err)
		}
	}
	if err := c.SendMail(from.Address, []string{to}, bytes.NewReader(msg)); err != nil {
		return err
	}
	if err := c.Quit(); err != nil {
		// The message was accepted (DATA answered 250): a failed QUIT changes nothing.
		return nil
	}
	return nil
}

// dial connects, with TLS when the server has it: implicitly for smtps://, by STARTTLS when
// an smtp:// server offers it, else in clear.
func (m *Mailer) dial(ctx context.Context) (_ *smtp.Client, tlsOn bool, _ error) {
	cfg := m.TLS
	if cfg == nil {
		cfg = &tls.Config{ServerName: m.Server.Host}
	}
	conn, err := m.connect(ctx, m.Server.ImplicitTLS, cfg)
	if err != nil {
		return nil, false, err
	}
	if m.Server.ImplicitTLS {
		return m.client(smtp.NewClient(conn)), true, nil
	}
	c, err := smtp.NewClientStartTLS(conn, cfg)
	if err == nil {
		return m.client(c), true, nil
	}
	var se *smtp.SMTPError
	if errors.As(err, &se) || !strings.Contains(err.Error(), "doesn't support STARTTLS") {
		return nil, false, fmt.Errorf("smtp starttls: %w", err)
	}
	// No STARTTLS offered: connect again and go on in clear.
	if conn, err = m.connect(ctx, false, nil); err != nil {
		return nil, false, err
	}
	return m.client(smtp.NewClient(conn)), false, nil
}

func (m *Mailer) connect(ctx context.Context, implicitTLS bool, cfg *tls.Config) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.Server.Addr())
	if err != nil {
		return nil, fmt.Errorf("smtp connect %s: %w", m.Server, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if implicitTLS {
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("smtps handshake %s: %w", m.Server, err)
		}
		return tc, nil
	}
	return conn, nil
}

func (m *Mailer) client(c *smtp.Client) *smtp.Client {
	name := m.LocalName
	if name == "" {
		name = "localhost"
	}
	_ = c.Hello(name) // only records the name when the greeting has not been read yet
	return c
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
