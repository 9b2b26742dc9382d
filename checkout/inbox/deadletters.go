package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/pgtext"
)

// Dead letters of the provider inbox: validly signed deliveries that tekrar cannot store or
// apply as they are. Redelivering such an event changes nothing, so answering it 5xx would
// only make the provider resend it until it gives up, and the event would be lost. It is
// kept instead, as the raw bytes that arrived, and acknowledged; the console lists it, and an
// admin replays it once tekrar can take it (ReplayDeadLetter).
//
// A failure that may pass (the database unreachable, a serialization failure, a deadlock,
// any error tekrar cannot class) is not a dead letter: the delivery is answered 5xx and the
// provider delivers it again.

// OutcomeDeadLetter is the outcome of a delivery kept as a dead letter.
const OutcomeDeadLetter = "dead_letter"

// ErrDeadLetterNotFound: no dead letter has that id.
var ErrDeadLetterNotFound = errors.New("no such dead letter")

// ErrDeadLetterReplayed: the dead letter was replayed already.
var ErrDeadLetterReplayed = errors.New("the dead letter was replayed already")

// maxDeadDetail bounds the detail kept with a dead letter.
const maxDeadDetail = 500

// DeadLetter keeps body, delivered by provider under webhookID and refused by cause (an
// *UnstorableEventError), as a dead letter; a redelivery of the same body counts on it.
func (s *Inbox) DeadLetter(ctx context.Context, provider, webhookID string, body []byte, cause error) error {
	reason, detail := DeadNotAnEvent, cause.Error()
	var u *UnstorableEventError
	if errors.As(cause, &u) {
		reason, detail = u.Reason, u.Detail
	}
	id := pgtext.Clean(webhookID, 255)
	if id == "" {
		id = "?"
	}
	if _, err := s.db.ExecContext(ctx, recordDeadLetterSQL, provider, id, body, reason,
		pgtext.Clean(detail, maxDeadDetail), s.cfg.Now()); err != nil {
		return fmt.Errorf("keep dead letter %q: %w", id, err)
	}
	return nil
}

// refusedAsData reports whether err is the database refusing the event's data, which it
// will refuse on every redelivery too: a data exception (class 22: text it cannot hold, a
// number out of range, malformed JSON) or a CHECK violation. As an *UnstorableEventError.
func refusedAsData(err error) (*UnstorableEventError, bool) {
	e := pq.As(err)
	if e == nil || (e.Code.Class() != pqerror.Class("22") && e.Code != pqerror.CheckViolation) {
		return nil, false
	}
	// The message only: the error's detail may quote the offending value.
	return &UnstorableEventError{Reason: DeadRefusedByStore, Detail: string(e.Code) + " " + e.Message}, true
}

// ReplayDeadLetter decodes dead letter id again and applies it as the inbox applies a
// delivery, in one transaction with marking it replayed; it returns the outcome (applied,
// stale, ignored, or duplicate when the provider's redelivery got it stored meanwhile). A
// dead letter tekrar still cannot take is left as it is and its error (an
// *UnstorableEventError when it is still unstorable) returned.
func (s *Inbox) ReplayDeadLetter(ctx context.Context, id int64) (outcome string, err error) {
	err = tdb.InTx(ctx, s.db, fmt.Sprintf("replay dead letter %d", id), func(tx *sqlx.Tx) error {
		var d struct {
			Provider  string `db:"provider"`
			WebhookID string `db:"webhook_id"`
			Body      []byte `db:"body"`
			State     string `db:"state"`
		}
		switch err := tx.GetContext(ctx, &d, lockDeadLetterSQL, id); {
		case errors.Is(err, sql.ErrNoRows):
			return ErrDeadLetterNotFound
		case err != nil:
			return fmt.Errorf("read: %w", err)
		case d.State != "dead":
			return ErrDeadLetterReplayed
		}
		decode := Decode
		if f := s.cfg.Decoders[d.Provider]; f != nil {
			decode = f
		}
		pe, err := decode(d.Body)
		if err != nil {
			if !errors.As(err, new(*UnstorableEventError)) {
				err = unstorable(DeadNotAnEvent, "%s", err.Error())
			}
			return err
		}
		if pe.ID != d.WebhookID {
			return unstorable(DeadNotAnEvent, "the event's id is not its signed webhook-id")
		}
		if outcome, err = s.apply(ctx, tx, providerEventOf(d.Provider, d.Body, pe)); err != nil {
			if u, ok := refusedAsData(err); ok {
				return u
			}
			return err
		}
		if _, err := tx.ExecContext(ctx, replayedDeadLetterSQL, id, s.cfg.Now(), outcome); err != nil {
			return fmt.Errorf("mark replayed: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return outcome, nil
}
