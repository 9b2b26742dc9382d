package config

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
)

// SMTPServer is TEKRAR_SMTP_URL read: the mail server receipts are sent through. The zero
// value means none is configured, and receipts are kept for the console instead.
type SMTPServer struct {
	Host        string
	Port        int
	ImplicitTLS bool // smtps://: TLS from the first byte; smtp:// uses STARTTLS when offered
	Username    string
	Password    string
}

// Configured reports whether a server was given.
func (s SMTPServer) Configured() bool { return s.Host != "" }

// Addr is host:port, for dialling.
func (s SMTPServer) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// String names the server without its credentials, for logs.
func (s SMTPServer) String() string {
	if !s.Configured() {
		return "(none)"
	}
	scheme := "smtp"
	if s.ImplicitTLS {
		scheme = "smtps"
	}
	return scheme + "://" + s.Addr()
}

// ParseSMTPURL reads smtp://[user:pass@]host[:port] (port 587 when omitted) or
// smtps://[user:pass@]host[:port] (port 465). An empty value is no server. Errors never
// repeat the value: it may hold a password.
func ParseSMTPURL(v string) (SMTPServer, error) {
	if v == "" {
		return SMTPServer{}, nil
	}
	u, err := url.Parse(v)
	if err != nil {
		return SMTPServer{}, errors.New("not a valid smtp:// or smtps:// URL")
	}
	var s SMTPServer
	switch u.Scheme {
	case "smtp":
		s.Port = 587
	case "smtps":
		s.Port, s.ImplicitTLS = 465, true
	default:
		return SMTPServer{}, errors.New("the scheme must be smtp:// (STARTTLS when offered) or smtps:// (TLS)")
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return SMTPServer{}, errors.New("an SMTP URL is only [user:pass@]host[:port]")
	}
	s.Host = u.Hostname()
	if s.Host == "" {
		return SMTPServer{}, errors.New("the SMTP URL names no host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return SMTPServer{}, errors.New("the SMTP URL's port is not between 1 and 65535")
		}
		s.Port = n
	}
	if u.User != nil {
		s.Username = u.User.Username()
		s.Password, _ = u.User.Password()
		if strings.ContainsAny(s.Username+s.Password, "\x00\r\n") {
			return SMTPServer{}, errors.New("the SMTP URL's credentials hold a control character")
		}
	}
	return s, nil
}

// SMTPURL binds an SMTP server URL (ParseSMTPURL); empty is none.
func (s *Set) SMTPURL(p *SMTPServer, name, env, usage string) {
	s.parse(name, env, "", usage, "url", func(v string) error {
		srv, err := ParseSMTPURL(v)
		if err != nil {
			return err
		}
		*p = srv
		return nil
	})
}

// MailAddress binds one e-mail address, with an optional display name ("Shop
// <receipts@shop.example>"); it goes into a header, so anything that is not exactly one
// address is refused.
func (s *Set) MailAddress(p *string, name, env, def, usage string) {
	s.parse(name, env, def, usage, "address", func(v string) error {
		a, err := mail.ParseAddress(v)
		if err != nil || strings.ContainsAny(v, "\r\n") || !strings.Contains(a.Address, "@") {
			return fmt.Errorf("%q is not one e-mail address (like 'Shop <receipts@shop.example>')", v)
		}
		*p = v
		return nil
	})
}
