package receipts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/riverqueue/river"
)

// SendArgs is the send job of one receipt. It is inserted unique by its arguments, in the
// transaction that stored the receipt, so a receipt has one send job.
type SendArgs struct {
	ReceiptID int64 `json:"receipt_id"`
}

// Kind is the job's kind in River.
func (SendArgs) Kind() string { return "receipt_send" }

// InsertOpts: unique per receipt; up to sendAttempts tries with River's backoff (about
// four hours from the first to the last: attempt^4 seconds apart).
func (SendArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: sendAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

const sendAttempts = 10

// Sender sends queued receipts.
type Sender struct {
	DB     *sql.DB
	Mailer *Mailer
	Now    func() time.Time
	// afterAccepted, in tests, runs after the SMTP server accepted a message and before it is
	// recorded as sent: an error there is the process dying at that moment.
	afterAccepted func() error
}

// Deliver sends the receipt id if it is still queued. final says this is the last attempt
// the job gets: a failure then marks the receipt failed.
//
// The attempt is counted before the message goes out. If the process dies after the SMTP
// server accepted the message and before markSent, the job runs again and sends the same
// message again, with the same Message-ID: the customer may get it twice, but their mail
// client (and many relays) see that it is one message. Sending at most once would instead
// lose receipts on such a crash.
//
// The error returned names the receipt and the SMTP code, never the server's text or the
// address: the job's error goes to logs, the full reason to the receipt's last_error.
func (s *Sender) Deliver(ctx context.Context, id int64, final bool) error {
	r, err := claimSend(ctx, s.DB, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // sent already, or failed for good
	}
	if err != nil {
		return fmt.Errorf("claim receipt %d: %w", id, err)
	}
	msg, err := buildMessage(r, s.Mailer.From)
	if err != nil {
		if merr := markAttemptFailed(ctx, s.DB, id, err.Error(), true); merr != nil {
			return merr
		}
		return river.JobCancel(fmt.Errorf("receipt %d cannot be sent: %w", id, err))
	}
	if err := s.Mailer.Send(ctx, r.Recipient, msg); err != nil {
		var se *smtp.SMTPError
		// A recipient refused for good (5xx to RCPT) stays refused: no more attempts.
		permanent := errors.As(err, &se) && se.Code >= 500 && se.Code < 600 && isRecipientRefusal(se)
		if merr := markAttemptFailed(context.WithoutCancel(ctx), s.DB, id, err.Error(), final || permanent); merr != nil {
			return merr
		}
		out := fmt.Errorf("send receipt %d: %s", id, smtpSummary(err))
		if permanent {
			return river.JobCancel(out)
		}
		return out
	}
	if s.afterAccepted != nil {
		if err := s.afterAccepted(); err != nil {
			return err
		}
	}
	return markSent(context.WithoutCancel(ctx), s.DB, id, s.now())
}

func (s *Sender) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

// isRecipientRefusal: the enhanced status codes of a mailbox that does not exist or a bad
// address (RFC 3463 X.1.x).
func isRecipientRefusal(se *smtp.SMTPError) bool { return se.EnhancedCode[1] == 1 }

// smtpSummary describes a send error without the server's text (which may quote the address).
func smtpSummary(err error) string {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return fmt.Sprintf("smtp server answered %d", se.Code)
	}
	return err.Error() // a connection or TLS failure: names the server, never the message
}

// SendWorker is the River worker of SendArgs.
type SendWorker struct {
	river.WorkerDefaults[SendArgs]
	Sender *Sender
}

// Work sends the receipt; a failure is retried by River with its backoff.
func (w *SendWorker) Work(ctx context.Context, job *river.Job[SendArgs]) error {
	return w.Sender.Deliver(ctx, job.Args.ReceiptID, job.Attempt >= job.MaxAttempts)
}
