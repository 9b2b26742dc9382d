package receipts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/tekrar/tekrar/checkout/mailbox"
)

// eventIDPattern is the shape of an outbox event's public id; it goes into a header.
var eventIDPattern = regexp.MustCompile(`^evt_[0-9A-Za-z]{1,64}$`)

// MessageID is the Message-ID of the receipt made for event eventID, sent from from:
// "<evt_….receipt@domain of from>". It depends on nothing else, so every send of the
// receipt, the first and any resend after a crash, carries the same one.
func MessageID(eventID, from string) (string, error) {
	if !eventIDPattern.MatchString(eventID) {
		return "", fmt.Errorf("event id %q is not an outbox event id", eventID)
	}
	a, err := mail.ParseAddress(from)
	if err != nil {
		return "", fmt.Errorf("from address: %w", err)
	}
	domain := a.Address[strings.LastIndexByte(a.Address, '@')+1:]
	return "<" + eventID + ".receipt@" + domain + ">", nil
}

// errBadRecipient: the order's customer e-mail is not an ordinary mailbox address (it would
// not survive a header, names several mailboxes, or names a host rather than a mailbox).
var errBadRecipient = errors.New("the customer's e-mail is not an ordinary mailbox address")

// checkRecipient accepts the addresses the API takes (mailbox.Check): what goes into the To
// header and the RCPT command cannot carry a line break, a second address, a name, or a
// route to a host of the client's choosing. Rows written before the API was as strict are
// held to the same rule here.
func checkRecipient(s string) error {
	if mailbox.Check(s) != nil {
		return errBadRecipient
	}
	return nil
}

// headerText makes s safe for an unstructured header: control characters (CR and LF
// included, which would start a header of their own) become spaces, and anything not plain
// ASCII is written as RFC 2047 encoded words.
func headerText(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return mime.QEncoding.Encode("utf-8", s)
}

// buildMessage writes the receipt as an RFC 5322 message: multipart/alternative with the
// text part first and the HTML part last (the one a mail client prefers), each
// quoted-printable. Everything in it comes from the stored row and from, so every attempt
// writes the same bytes: the boundary is derived from the Message-ID and the Date is the
// receipt's creation time.
func buildMessage(r Receipt, from string) ([]byte, error) {
	if err := checkRecipient(r.Recipient); err != nil {
		return nil, err
	}
	fa, err := mail.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("from address: %w", err)
	}
	sum := sha256.Sum256([]byte(r.MessageID))
	boundary := "tekrar-" + hex.EncodeToString(sum[:12])

	var b bytes.Buffer
	h := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	h("From", fa.String())
	h("To", (&mail.Address{Address: r.Recipient}).String())
	h("Subject", headerText(r.Subject))
	h("Date", r.CreatedAt.UTC().Format(time.RFC1123Z))
	h("Message-ID", r.MessageID)
	h("Auto-Submitted", "auto-generated")
	h("MIME-Version", "1.0")
	h("Content-Type", `multipart/alternative; boundary="`+boundary+`"`)
	b.WriteString("\r\n")
	for _, p := range []struct{ typ, body string }{{"text/plain", r.BodyText}, {"text/html", r.BodyHTML}} {
		b.WriteString("--" + boundary + "\r\n")
		h("Content-Type", p.typ+"; charset=utf-8")
		h("Content-Transfer-Encoding", "quoted-printable")
		b.WriteString("\r\n")
		w := quotedprintable.NewWriter(&b)
		if _, err := w.Write([]byte(strings.ReplaceAll(strings.ReplaceAll(p.body, "\r\n", "\n"), "\n", "\r\n"))); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		b.WriteString("\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
	return b.Bytes(), nil
}
