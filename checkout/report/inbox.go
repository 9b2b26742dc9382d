package report

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/pgtext"
)

// InboxEvent is one event of the payment provider as tekrar's inbox recorded it.
type InboxEvent struct {
	Provider       string    `db:"provider"`
	ID             string    `db:"event_id"`
	Type           string    `db:"type"`
	ChargeID       *string   `db:"charge_id"`
	Sequence       *int      `db:"sequence"`
	Outcome        string    `db:"outcome"` // applied, stale or ignored
	Deliveries     int       `db:"deliveries"`
	ReceivedAt     time.Time `db:"received_at"`
	LastDeliveryAt time.Time `db:"last_delivery_at"`
	// OrderPublicID is the order the event's charge paid for, when tekrar recorded that
	// charge on an order, as its payment or as one of its later installments; nil otherwise
	// (an order still pending, an orphan charge).
	OrderPublicID *string `db:"order_public_id"`
}

// InboxCounts sums the inbox: events by outcome, and the deliveries beyond the first
// (duplicates absorbed).
type InboxCounts struct {
	Events     int `db:"events"`
	Applied    int `db:"applied"`
	Stale      int `db:"stale"`
	Ignored    int `db:"ignored"`
	Duplicates int `db:"duplicates"`
}

// inboxLimit bounds the inbox page: the newest events; older ones by charge (?charge=).
const inboxLimit = 200

// Inbox returns the newest provider events (of one charge when charge is not empty), and
// the counts of the whole inbox. The list reads the received_at index (or the charge's);
// the counts scan the inbox, which holds one row per event the provider sent.
func Inbox(ctx context.Context, db sqlx.QueryerContext, charge string) ([]InboxEvent, InboxCounts, error) {
	var rows []InboxEvent
	q := `SELECT e.provider, e.event_id, e.type, e.charge_id, e.sequence, e.outcome, e.deliveries, e.received_at,
	             e.last_delivery_at, o.public_id::text AS order_public_id
	        FROM provider_events e
	        LEFT JOIN payments p ON p.provider_charge_id = e.charge_id
	        LEFT JOIN installments i ON i.provider_charge_id = e.charge_id AND i.n > 1
	        LEFT JOIN orders o ON o.id = COALESCE(p.order_id, i.order_id)`
	args := []any{inboxLimit}
	if charge != "" {
		q += ` WHERE e.charge_id = $2 ORDER BY e.sequence DESC, e.received_at DESC LIMIT $1`
		args = append(args, charge)
	} else {
		q += ` ORDER BY e.received_at DESC, e.event_id LIMIT $1`
	}
	if err := sqlx.SelectContext(ctx, db, &rows, q, args...); err != nil {
		return nil, InboxCounts{}, fmt.Errorf("inbox: %w", err)
	}
	var c InboxCounts
	if err := sqlx.GetContext(ctx, db, &c, `
		SELECT count(*) AS events,
		       count(*) FILTER (WHERE outcome = 'applied') AS applied,
		       count(*) FILTER (WHERE outcome = 'stale') AS stale,
		       count(*) FILTER (WHERE outcome = 'ignored') AS ignored,
		       coalesce(sum(deliveries - 1), 0) AS duplicates
		  FROM provider_events`); err != nil {
		return nil, InboxCounts{}, fmt.Errorf("inbox counts: %w", err)
	}
	for i := range rows {
		rows[i].ReceivedAt, rows[i].LastDeliveryAt = rows[i].ReceivedAt.UTC(), rows[i].LastDeliveryAt.UTC()
	}
	return rows, c, nil
}

// InboxRefusal is one reason deliveries to the inbox were refused (or failed to apply),
// counted over the last hour and the last 24 hours.
type InboxRefusal struct {
	Reason   string `db:"reason"`
	LastHour int64  `db:"last_hour"`
	LastDay  int64  `db:"last_day"`
}

// InboxRefusals sums the inbox's refusal counters (provider_inbox_refusals) of the 24 hours
// before now, by reason, and the newest refusal. Refusals reads at most 24 × 60 buckets per
// reason.
type InboxRefusals struct {
	ByReason []InboxRefusal
	// Last is the newest refusal of the 24 hours; nil when there was none.
	Last *LastRefusal
}

// LastRefusal is the newest refusal: when, why and from which (truncated) address.
type LastRefusal struct {
	At     time.Time `db:"last_at"`
	Reason string    `db:"reason"`
	Remote string    `db:"last_remote"`
}

// Refusals reads the refusal counters of the 24 hours before now.
func Refusals(ctx context.Context, db sqlx.QueryerContext, now time.Time) (InboxRefusals, error) {
	var r InboxRefusals
	if err := sqlx.SelectContext(ctx, db, &r.ByReason, `
		SELECT reason,
		       coalesce(sum(count) FILTER (WHERE bucket >= $2), 0) AS last_hour,
		       sum(count) AS last_day
		  FROM provider_inbox_refusals
		 WHERE bucket >= $1
		 GROUP BY reason
		 ORDER BY reason`, now.Add(-24*time.Hour).Truncate(time.Minute), now.Add(-time.Hour).Truncate(time.Minute)); err != nil {
		return InboxRefusals{}, fmt.Errorf("inbox refusals: %w", err)
	}
	var last []LastRefusal
	if err := sqlx.SelectContext(ctx, db, &last, `
		SELECT last_at, reason, last_remote FROM provider_inbox_refusals
		 WHERE bucket >= $1 ORDER BY last_at DESC LIMIT 1`, now.Add(-24*time.Hour).Truncate(time.Minute)); err != nil {
		return InboxRefusals{}, fmt.Errorf("last inbox refusal: %w", err)
	}
	if len(last) == 1 {
		last[0].At = last[0].At.UTC()
		r.Last = &last[0]
	}
	return r, nil
}

// InboxDeadLetter is a validly signed delivery tekrar could not store as an event, kept raw
// (provider_dead_letters). Its body is not read here: the console shows its size, not its
// bytes.
type InboxDeadLetter struct {
	ID             int64      `db:"id"`
	WebhookID      string     `db:"webhook_id"`
	Reason         string     `db:"reason"`
	Detail         string     `db:"detail"`
	State          string     `db:"state"` // dead or replayed
	Size           int        `db:"size"`
	Deliveries     int        `db:"deliveries"`
	ReceivedAt     time.Time  `db:"received_at"`
	LastDeliveryAt time.Time  `db:"last_delivery_at"`
	ReplayedAt     *time.Time `db:"replayed_at"`
	ReplayOutcome  *string    `db:"replay_outcome"`
}

// DeadLetters returns the newest dead letters of the inbox, waiting ones first, and how
// many wait for an operator.
func DeadLetters(ctx context.Context, db sqlx.QueryerContext) ([]InboxDeadLetter, int, error) {
	var rows []InboxDeadLetter
	if err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT id, webhook_id, reason, detail, state, length(body) AS size, deliveries, received_at,
		       last_delivery_at, replayed_at, replay_outcome
		  FROM provider_dead_letters
		 ORDER BY state = 'dead' DESC, received_at DESC, id DESC LIMIT $1`, inboxLimit); err != nil {
		return nil, 0, fmt.Errorf("dead letters: %w", err)
	}
	var waiting int
	if err := sqlx.GetContext(ctx, db, &waiting, `SELECT count(*) FROM provider_dead_letters WHERE state = 'dead'`); err != nil {
		return nil, 0, fmt.Errorf("dead letters waiting: %w", err)
	}
	for i := range rows {
		rows[i].ReceivedAt, rows[i].LastDeliveryAt = rows[i].ReceivedAt.UTC(), rows[i].LastDeliveryAt.UTC()
	}
	return rows, waiting, nil
}

// DeadLetter returns dead letter id; ok false when there is none.
func DeadLetter(ctx context.Context, db sqlx.QueryerContext, id int64) (d InboxDeadLetter, ok bool, err error) {
	var rows []InboxDeadLetter
	if err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT id, webhook_id, reason, detail, state, length(body) AS size, deliveries, received_at,
		       last_delivery_at, replayed_at, replay_outcome
		  FROM provider_dead_letters WHERE id = $1`, id); err != nil {
		return d, false, fmt.Errorf("dead letter %d: %w", id, err)
	}
	if len(rows) == 0 {
		return d, false, nil
	}
	return rows[0], true, nil
}

// inboxProviders names the providers the inbox holds events of, for a search that knows an
// event's id or a charge's but not its provider: the primary key and the charge index lead
// with the provider. A loose scan of the primary key reads one entry per provider (there
// are one or two), instead of the inbox.
const inboxProviders = `ANY (ARRAY(
	WITH RECURSIVE ps(provider) AS (
	    SELECT min(provider) FROM provider_events
	    UNION ALL
	    SELECT (SELECT min(e.provider) FROM provider_events e WHERE e.provider > ps.provider)
	      FROM ps WHERE ps.provider IS NOT NULL)
	SELECT provider FROM ps WHERE provider IS NOT NULL))`

// SearchInbox is the inbox's own search: a provider event by its id, the events of a type,
// or the events of an order's charges (its ord_ id: its payment and its installments'),
// newest first, at most the inbox page's 200. A query Postgres cannot hold as text matches
// nothing.
func SearchInbox(ctx context.Context, db sqlx.QueryerContext, q string) ([]InboxEvent, error) {
	if q == "" || len(q) > MaxSearchLength || !pgtext.Valid(q) {
		return nil, nil
	}
	var a sqlArgs
	limit := a.p(inboxLimit)
	var where string
	if strings.HasPrefix(q, "ord_") {
		p := a.p(q)
		where = `e.provider = ` + inboxProviders + ` AND e.charge_id = ANY (ARRAY(
		             SELECT p.provider_charge_id FROM orders o JOIN payments p ON p.order_id = o.id WHERE o.public_id::text = ` + p + `
		             UNION ALL
		             SELECT i.provider_charge_id FROM orders o JOIN installments i ON i.order_id = o.id
		              WHERE o.public_id::text = ` + p + ` AND i.provider_charge_id IS NOT NULL))`
	} else {
		p := a.p(q)
		// An id or a type: two index reads, one per column.
		where = `(e.provider, e.event_id) IN (
		             SELECT x.provider, x.event_id FROM provider_events x
		              WHERE x.provider = ` + inboxProviders + ` AND x.event_id = ` + p + `
		             UNION ALL
		             (SELECT x.provider, x.event_id FROM provider_events x WHERE x.type = ` + p + `
		               ORDER BY x.received_at DESC LIMIT ` + limit + `))`
	}
	var rows []InboxEvent
	if err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT e.provider, e.event_id, e.type, e.charge_id, e.sequence, e.outcome, e.deliveries, e.received_at,
		       e.last_delivery_at, o.public_id::text AS order_public_id
		  FROM provider_events e
		  LEFT JOIN payments p ON p.provider_charge_id = e.charge_id
		  LEFT JOIN installments i ON i.provider_charge_id = e.charge_id AND i.n > 1
		  LEFT JOIN orders o ON o.id = COALESCE(p.order_id, i.order_id)
		 WHERE `+where+`
		 ORDER BY e.received_at DESC, e.event_id LIMIT `+limit, a...); err != nil {
		return nil, fmt.Errorf("search inbox: %w", err)
	}
	for i := range rows {
		rows[i].ReceivedAt, rows[i].LastDeliveryAt = rows[i].ReceivedAt.UTC(), rows[i].LastDeliveryAt.UTC()
	}
	return rows, nil
}

// InboxFilter narrows the inbox's events as its page does: Query (an event id, a type, or an
// order's ord_ id, as SearchInbox reads it) replaces the list, and Charge narrows it to one
// charge's events otherwise.
type InboxFilter struct {
	Charge string
	Query  string
}

// InboxEvents returns a page of the provider events the filter selects, newest first (by
// when they were received, then event id and provider): every event, where the inbox page
// shows the newest 200. A Query Postgres cannot hold as text, or longer than
// MaxSearchLength, selects nothing, as SearchInbox's.
func InboxEvents(ctx context.Context, db sqlx.QueryerContext, f InboxFilter, page Page) ([]InboxEvent, Page, error) {
	cur, err := page.decode()
	if err != nil {
		return nil, Page{}, err
	}
	var provider, eventID string
	if cur != nil {
		var ok bool
		if eventID, provider, ok = strings.Cut(cur.key, "\x1f"); !ok {
			return nil, Page{}, invalidQuery("malformed page cursor")
		}
	}
	n := page.size()
	if q := f.Query; q != "" && (len(q) > MaxSearchLength || !pgtext.Valid(q)) {
		return nil, Page{Limit: n}, nil
	}
	var a sqlArgs
	var preds []string
	switch {
	case strings.HasPrefix(f.Query, "ord_"):
		p := a.p(f.Query)
		preds = append(preds, `e.provider = `+inboxProviders+` AND e.charge_id = ANY (ARRAY(
		             SELECT p.provider_charge_id FROM orders o JOIN payments p ON p.order_id = o.id WHERE o.public_id::text = `+p+`
		             UNION ALL
		             SELECT i.provider_charge_id FROM orders o JOIN installments i ON i.order_id = o.id
		              WHERE o.public_id::text = `+p+` AND i.provider_charge_id IS NOT NULL))`)
	case f.Query != "":
		p := a.p(f.Query)
		preds = append(preds, `((e.provider = `+inboxProviders+` AND e.event_id = `+p+`) OR e.type = `+p+`)`)
	case f.Charge != "":
		preds = append(preds, `e.charge_id = `+a.p(f.Charge))
	}
	if cur != nil {
		at := a.p(cur.at)
		preds = append(preds, `(e.received_at < `+at+`::timestamptz OR (e.received_at = `+at+`::timestamptz AND (e.event_id, e.provider) > (`+
			a.p(eventID)+`::text, `+a.p(provider)+`::text)))`)
	}
	var rows []InboxEvent
	if err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT e.provider, e.event_id, e.type, e.charge_id, e.sequence, e.outcome, e.deliveries, e.received_at,
		       e.last_delivery_at, o.public_id::text AS order_public_id
		  FROM provider_events e
		  LEFT JOIN payments p ON p.provider_charge_id = e.charge_id
		  LEFT JOIN installments i ON i.provider_charge_id = e.charge_id AND i.n > 1
		  LEFT JOIN orders o ON o.id = COALESCE(p.order_id, i.order_id)`+sqlWhere(preds)+`
		 ORDER BY e.received_at DESC, e.event_id, e.provider LIMIT `+a.p(n+1), a...); err != nil {
		return nil, Page{}, fmt.Errorf("inbox events: %w", err)
	}
	nx := nextPage(n, len(rows), func() pageCursor {
		r := rows[n-1]
		return pageCursor{at: r.ReceivedAt, key: r.ID + "\x1f" + r.Provider}
	})
	if len(rows) > n {
		rows = rows[:n]
	}
	for i := range rows {
		rows[i].ReceivedAt, rows[i].LastDeliveryAt = rows[i].ReceivedAt.UTC(), rows[i].LastDeliveryAt.UTC()
	}
	return rows, nx, nil
}
