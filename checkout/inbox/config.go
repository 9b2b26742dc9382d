package inbox

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/psp"
)

// The defaults of Config's fields, for a field left zero.
const (
	// RefusalFlushDefault is Config.RefusalFlush's default.
	RefusalFlushDefault = 100 * time.Millisecond
)

// Config tunes the inbox; the zero value of a field takes its default.
type Config struct {
	// RefusalFlush is how often the refusals counted in memory are written
	// (provider_inbox_refusals): a process killed loses the counts of at most this long.
	// Default RefusalFlushDefault (a tenth of a second), as often as the key events.
	RefusalFlush time.Duration
	// Now is the inbox's clock; tests inject one. Default time.Now.
	Now func() time.Time
	// Crash, if set, is called at the inbox's crash point (checkout.CrashInboxBeforeCommit)
	// so that the crash harness can kill the process exactly there. Nil in production.
	Crash func(point string)
	// Decoders decode the stored bodies of providers whose webhooks are not in the
	// sandbox's shape, by provider name (Stripe's: stripe.DecodeEvent), for the replay of
	// their dead letters; a provider without one is read by Decode. Default none.
	Decoders map[string]func(body []byte) (psp.Event, error)
}

// withDefaults fills the fields left zero with their defaults.
func (c Config) withDefaults() Config {
	c.RefusalFlush = cmp.Or(c.RefusalFlush, RefusalFlushDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// mustValidate panics on a setting the inbox cannot run with: a programming error, caught
// at start.
func (c Config) mustValidate() Config {
	if c.RefusalFlush < 0 {
		panic(fmt.Sprintf("inbox: RefusalFlush %s, want zero (the default) or more", c.RefusalFlush))
	}
	return c
}

// Inbox receives the payment provider's webhooks: it records each event once, applies it
// in its charge's order, keeps what it cannot store as a dead letter, and counts refused
// deliveries. The API's POST /webhooks/psp and the console's dead-letter replay call it.
type Inbox struct {
	db         *sqlx.DB
	svc        *checkout.Service // settles an order from its charge (SettleProviderCharge)
	cfg        Config
	refusalLog *refusalLog
}

// New returns the inbox over db; svc settles the orders its events are about. It starts
// the writer of the refusal counts: Close stops it. It panics on a Config the inbox cannot
// run with (a negative RefusalFlush).
func New(db *sqlx.DB, svc *checkout.Service, cfg Config, logger *slog.Logger) *Inbox {
	cfg = cfg.withDefaults().mustValidate()
	return &Inbox{db: db, svc: svc, cfg: cfg, refusalLog: newRefusalLog(db, logger, cfg.RefusalFlush)}
}

// Close writes the refusals still counted in memory and stops their writer.
func (s *Inbox) Close() { s.refusalLog.close() }

// Flush writes every refusal counted so far; they are otherwise written every
// Config.RefusalFlush.
func (s *Inbox) Flush() { s.refusalLog.flush() }

func (s *Inbox) crash(point string) {
	if s.cfg.Crash != nil {
		s.cfg.Crash(point)
	}
}
