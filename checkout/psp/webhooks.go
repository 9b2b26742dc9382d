package psp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/stdwebhook"
)

// WebhookOptions configure how the sandbox delivers its events. Like a real processor it
// delivers at least once, retries any answer but a 2xx with backoff, and promises no order;
// the shares make the sandbox worse than most, so that a receiver is tested against every
// misbehaviour.
type WebhookOptions struct {
	// URL receives a POST per delivery, signed in the Standard Webhooks format.
	URL string
	// Secret is the shared signing secret ("whsec_..."; see package stdwebhook).
	Secret string
	// Duplicate is the share of delivered events sent a second time at once.
	Duplicate float64
	// Delay is the share of events held back for DelayFor before their first delivery, so
	// that they arrive after events that followed them.
	Delay    float64
	DelayFor time.Duration
	// Interval is how often due events are looked for; 0 means 100ms.
	Interval time.Duration
	// Timeout bounds one delivery; 0 means 5s.
	Timeout time.Duration
	// MaxBackoff caps the wait between two deliveries of an event that failed; 0 means 1m.
	MaxBackoff time.Duration
	// FirstAfter holds every event back this long after it happened before its first
	// delivery, as a processor that sends its notifications late does; 0 sends at once.
	FirstAfter time.Duration
	// RetryEvery, if set, spaces the deliveries of an event that failed evenly instead of
	// the doubling backoff.
	RetryEvery time.Duration
	// MaxAttempts, if set, is how many times an event is taken for delivery (a hold of
	// Delay counts as one): once the last delivery fails the sandbox gives up on the event,
	// which is never sent again, as a processor whose retries stop does. 0: retried until
	// acknowledged.
	MaxAttempts int
	// Client sends the deliveries; nil means a client with Timeout.
	Client *http.Client
}

// WebhookStats counts what the sender did since the sandbox was made.
type WebhookStats struct {
	Attempts   int64 // POSTs sent, duplicates included
	Delivered  int64 // events acknowledged with a 2xx
	Failed     int64 // POSTs that got no 2xx (retried later)
	Duplicates int64 // second POSTs of an event already acknowledged
	Delayed    int64 // events held back before their first delivery
	GaveUp     int64 // events never to be sent again (MaxAttempts)
}

type webhookSender struct {
	opts WebhookOptions
	key  stdwebhook.Key
	err  error // a bad secret: every delivery fails with it

	attempts, delivered, failed, duplicates, delayed, gaveUp atomic.Int64
}

func newWebhookSender(o WebhookOptions) *webhookSender {
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout}
	}
	w := &webhookSender{opts: o}
	w.key, w.err = stdwebhook.ParseSecret(o.Secret)
	return w
}

// WebhookStats returns the sender's counts; zero when the sandbox sends no webhooks.
func (s *Sandbox) WebhookStats() WebhookStats {
	if s.hooks == nil {
		return WebhookStats{}
	}
	h := s.hooks
	return WebhookStats{Attempts: h.attempts.Load(), Delivered: h.delivered.Load(), Failed: h.failed.Load(),
		Duplicates: h.duplicates.Load(), Delayed: h.delayed.Load(), GaveUp: h.gaveUp.Load()}
}

// RunWebhooks delivers due events until ctx ends. Several processes may run it on one
// ledger: each takes its events by moving their next attempt past the delivery's timeout.
func (s *Sandbox) RunWebhooks(ctx context.Context) {
	if s.hooks == nil {
		return
	}
	t := time.NewTicker(s.hooks.opts.Interval)
	defer t.Stop()
	for {
		if _, err := s.DeliverWebhooks(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("psp sandbox: webhook pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type dueEvent struct {
	ID       string `db:"id"`
	Body     string `db:"body"`
	Attempts int    `db:"attempts"`
}

// DeliverWebhooks makes one pass over the due events, in random order, and returns how
// many it acknowledged.
func (s *Sandbox) DeliverWebhooks(ctx context.Context) (int, error) {
	h := s.hooks
	if h == nil {
		return 0, nil
	}
	now := s.now()
	var due []dueEvent
	err := sqlx.SelectContext(ctx, s.db, &due, `
		UPDATE psp_events SET next_attempt_at = $2, attempts = attempts + 1
		 WHERE id IN (SELECT id FROM psp_events
		               WHERE delivered_at IS NULL AND next_attempt_at <= $1
		                 AND (attempts > 0 OR created_at <= $3)
		               ORDER BY next_attempt_at LIMIT 100 FOR UPDATE SKIP LOCKED)
		RETURNING id, body, attempts`, now, now.Add(2*h.opts.Timeout), now.Add(-h.opts.FirstAfter))
	if err != nil {
		return 0, fmt.Errorf("psp sandbox: take due events: %w", err)
	}
	rand.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	delivered := 0
	for _, e := range due {
		if e.Attempts == 1 && h.opts.Delay > 0 && rand.Float64() < h.opts.Delay {
			h.delayed.Add(1)
			if err := s.retryEvent(ctx, e.ID, now.Add(h.opts.DelayFor), ""); err != nil {
				return delivered, err
			}
			continue
		}
		if err := h.post(ctx, e); err != nil {
			h.failed.Add(1)
			if h.opts.MaxAttempts > 0 && e.Attempts >= h.opts.MaxAttempts {
				h.gaveUp.Add(1)
				if err := s.giveUpEvent(ctx, e.ID, err.Error()); err != nil {
					return delivered, err
				}
				continue
			}
			backoff := min(time.Duration(1<<min(e.Attempts, 20))*100*time.Millisecond, h.opts.MaxBackoff)
			backoff = backoff/2 + rand.N(backoff/2+1) // jitter
			if h.opts.RetryEvery > 0 {
				backoff = h.opts.RetryEvery
			}
			if err := s.retryEvent(ctx, e.ID, now.Add(backoff), err.Error()); err != nil {
				return delivered, err
			}
			continue
		}
		h.delivered.Add(1)
		delivered++
		if _, err := s.db.ExecContext(ctx, `
			UPDATE psp_events SET delivered_at = $2, next_attempt_at = NULL, last_error = NULL
			 WHERE id = $1 AND delivered_at IS NULL`, e.ID, s.now()); err != nil {
			return delivered, fmt.Errorf("psp sandbox: record delivery: %w", err)
		}
		if h.opts.Duplicate > 0 && rand.Float64() < h.opts.Duplicate {
			h.duplicates.Add(1)
			_ = h.post(ctx, e) // a duplicate's answer changes nothing
		}
	}
	return delivered, nil
}

func (s *Sandbox) retryEvent(ctx context.Context, id string, at time.Time, lastErr string) error {
	var le *string
	if lastErr != "" {
		le = &lastErr
	}
	if _, err := s.db.ExecContext(ctx, `
		UPDATE psp_events SET next_attempt_at = $2, last_error = coalesce($3, last_error)
		 WHERE id = $1 AND delivered_at IS NULL`, id, at, le); err != nil {
		return fmt.Errorf("psp sandbox: schedule event %s: %w", id, err)
	}
	return nil
}

// giveUpEvent leaves an event undelivered for ever: its next attempt is never due.
func (s *Sandbox) giveUpEvent(ctx context.Context, id, lastErr string) error {
	if _, err := s.db.ExecContext(ctx, `
		UPDATE psp_events SET next_attempt_at = 'infinity', last_error = $2
		 WHERE id = $1 AND delivered_at IS NULL`, id, lastErr); err != nil {
		return fmt.Errorf("psp sandbox: give up event %s: %w", id, err)
	}
	return nil
}

// post sends one delivery, signed now.
func (h *webhookSender) post(ctx context.Context, e dueEvent) error {
	h.attempts.Add(1)
	if h.err != nil {
		return h.err
	}
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.opts.URL, bytes.NewReader([]byte(e.Body)))
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	for k, v := range stdwebhook.Headers(e.ID, time.Now(), []byte(e.Body), h.key) {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tekrar-psp-sandbox")
	resp, err := h.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook: %s answered %d", h.opts.URL, resp.StatusCode)
	}
	return nil
}
