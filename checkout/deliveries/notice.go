package deliveries

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
)

// NoticeArgs is the job that writes to a client's contact address that one of its
// endpoints was disabled. It is inserted in the transaction that disables the endpoint, so
// that the notice survives a crash right after, and unique by its arguments, so that one
// disabling has one notice.
type NoticeArgs struct {
	EndpointID int64     `json:"endpoint_id"`
	DisabledAt time.Time `json:"disabled_at"`
}

// Kind names the job in River's table.
func (NoticeArgs) Kind() string { return "webhook_endpoint_disabled_notice" }

// InsertOpts: unique per disabling; River's backoff between up to ten tries (about four
// hours from the first to the last) while the mail server refuses or is away.
func (NoticeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Mailer hands one message to the mail server: checkout/receipts.Mailer's Send.
type Mailer interface {
	Send(ctx context.Context, to string, msg []byte) error
}

// NoticeWorker sends the notices. Like a receipt, a notice is sent at least once: a process
// that dies after the mail server accepted it and before River recorded the job done sends
// it again, with the same Message-ID, which mail clients show as one message.
type NoticeWorker struct {
	river.WorkerDefaults[NoticeArgs]
	DB *sqlx.DB
	// Mailer is nil when no mail server is configured: the notice is then only logged.
	Mailer Mailer
	From   string // the From address (TEKRAR_SMTP_FROM)
	Logger *slog.Logger
}

type noticeRow struct {
	ID         string     `db:"public_id"`
	URL        string     `db:"url"`
	DisabledAt *time.Time `db:"disabled_at"`
	Reason     string     `db:"disabled_reason"`
	ClientName string     `db:"client_name"`
	Contact    string     `db:"contact_email"`
}

// Work sends the notice of one disabling to the client's contact address, if it has one.
func (w *NoticeWorker) Work(ctx context.Context, job *river.Job[NoticeArgs]) error {
	var r noticeRow
	err := w.DB.GetContext(ctx, &r, noticeEndpointSQL, job.Args.EndpointID)
	if errors.Is(err, sql.ErrNoRows) {
		return river.JobCancel(fmt.Errorf("notice of endpoint %d: %w", job.Args.EndpointID, ErrEndpointNotFound))
	}
	if err != nil {
		return fmt.Errorf("notice of endpoint %d: %w", job.Args.EndpointID, err)
	}
	log := w.logger().With("endpoint", r.ID, "client", r.ClientName)
	switch {
	case r.Contact == "":
		log.Warn("webhook endpoint disabled; its client has no contact e-mail, nobody was written to")
		return nil
	case w.Mailer == nil:
		log.Warn("webhook endpoint disabled; no mail server is configured (TEKRAR_SMTP_URL), nobody was written to")
		return nil
	}
	if r.Reason == "" {
		r.Reason = "(enabled again since)"
	}
	msg, err := noticeMessage(r, job.Args.DisabledAt, w.From)
	if err != nil {
		return river.JobCancel(fmt.Errorf("notice of endpoint %s: %w", r.ID, err))
	}
	if err := w.Mailer.Send(ctx, r.Contact, msg); err != nil {
		return fmt.Errorf("notice of endpoint %s: %w", r.ID, err)
	}
	log.Info("webhook endpoint disabled; its client's contact was written to")
	return nil
}

func (w *NoticeWorker) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// shownURL is the endpoint's URL as a notice shows it: without its query and fragment, which
// may carry a token of the receiver's.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

// noticeMessage writes the notice as a plain-text RFC 5322 message. It says which endpoint,
// since when and why, and how to enable it and get back what it missed; it names no secret.
// Everything in it comes from the row and the job, so every try writes the same bytes.
func noticeMessage(r noticeRow, at time.Time, from string) ([]byte, error) {
	fa, err := mail.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("from address: %w", err)
	}
	domain := fa.Address[strings.LastIndexByte(fa.Address, '@')+1:]
	at = at.UTC()
	shown := shownURL(r.URL)
	reason := strings.ReplaceAll(r.Reason, r.URL, shown)
	since := at.Add(-Horizon).Truncate(time.Second)
	var b bytes.Buffer
	h := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	h("From", fa.String())
	h("To", (&mail.Address{Address: r.Contact}).String())
	h("Subject", mime.QEncoding.Encode("utf-8", "tekrar: your webhook endpoint "+r.ID+" is disabled"))
	h("Date", at.Format(time.RFC1123Z))
	h("Message-ID", fmt.Sprintf("<%s.disabled.%d@%s>", r.ID, at.UnixMicro(), domain))
	h("Auto-Submitted", "auto-generated")
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "8bit")
	b.WriteString("\r\n")
	lines := []string{
		"tekrar disabled a webhook endpoint of " + oneLine(r.ClientName) + ": it sends it no events until it is enabled again.",
		"",
		"Endpoint: " + r.ID,
		"URL:      " + oneLine(shown),
		"Disabled: " + at.Format(time.RFC3339),
		"Why:      " + oneLine(reason),
		"",
		"Events created since are not sent to it. Once it answers 2xx again, enable it and have",
		"it sent every event it missed, each under its original webhook-id, with one call:",
		"",
		"  POST /v1/webhook-endpoints/" + r.ID + "/resend",
		`  {"since": "` + since.Format(time.RFC3339) + `", "until": "<now, RFC 3339>"}`,
		"",
		"(since is the start of the failures that disabled it; a window reaches back at most",
		"30 days.) Your tekrar operator can do the same from the console's endpoint page.",
		"See \"When an endpoint is disabled\" in tekrar's webhooks documentation.",
	}
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	return b.Bytes(), nil
}

// oneLine keeps s to one line of the message.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// AddNoticeWorker registers the worker of the notices of disabled endpoints, on the River
// client whose Deliverer.Jobs queues them.
func AddNoticeWorker(workers *river.Workers, w *NoticeWorker) {
	river.AddWorker(workers, w)
}
