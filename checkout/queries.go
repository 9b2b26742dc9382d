package checkout

// The read queries of the operator console (package admin renders them): the searches that
// answer "I was charged twice". Plain structs and functions over any sqlx.QueryerContext.
//
// This file holds what the searches share: Page and its keyset cursor, the assembly of SQL
// text and arguments, ErrInvalidQuery. The searches live by topic in queries_keys.go,
// queries_keydetail.go, queries_events.go, queries_overview.go, queries_orders.go and
// orderdetail.go.
//
// Every list is keyset-paginated (a page costs the same however deep it is) and every value
// reaches Postgres as a parameter. The SQL of a search is assembled from the constant
// fragments next to it with only the predicates its filter uses, so that each combination
// gets a plan made for it instead of one generic plan full of "$n IS NULL OR ..." branches.
// The number of distinct texts is small and bounded, but they are not hot-path statements:
// pass the pool, not a db.Prepared.
//
// The indexes these queries rely on are in migrations 00004 and 00005;
// queries_plan_test.go checks at 200,000 keys that no plan scans idempotency_keys, orders
// or key_events whole.
//
// Two patterns recur, both to avoid an index on idempotency_keys (the checkout hot path):
//   - "newest first over all clients" reads each client's own (client_id, created_at)
//     index with a LATERAL subquery and merges the per-client pages: clients are few (apps
//     and POS fleets), so this costs a few index descents per client instead of a global
//     created_at index;
//   - an exact search without a client ("key k", "customer c") names the clients as
//     client_id = ANY (ARRAY(SELECT id FROM clients)), which lets the (client_id, ...)
//     indexes be probed once per client.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Page sizes of the console's lists.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 200
	// MaxTimelineEvents bounds KeyTimeline; a key with more events (a client replaying it in
	// a loop) shows its oldest ones, and ListEvents with EventFilter.Key pages through all.
	MaxTimelineEvents = 1000
	// MaxRateBuckets bounds ReplayRate.
	MaxRateBuckets = 1000
)

// ErrInvalidQuery wraps every refusal of a console query's input (an unknown state or
// kind, a malformed cursor, an empty time range): the console answers it with a 400.
var ErrInvalidQuery = errors.New("invalid console query")

func invalidQuery(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidQuery, fmt.Sprintf(format, args...))
}

// Page asks for one page of a list. The zero Page is the first page of DefaultPageLimit
// rows. A list returns the Page of its next rows; its After is empty on the last page.
type Page struct {
	Limit int    // rows per page: 0 means DefaultPageLimit, more than MaxPageLimit means MaxPageLimit
	After string // opaque cursor from the previous page; empty for the first page
}

func (p Page) size() int {
	switch {
	case p.Limit <= 0:
		return DefaultPageLimit
	case p.Limit > MaxPageLimit:
		return MaxPageLimit
	}
	return p.Limit
}

// pageCursor is the sort key of the last row of a page: a time and the row id that breaks
// ties; rows without an id of their own (a swept key's tombstone) break ties with their
// client's id and their key.
type pageCursor struct {
	at  time.Time
	id  int64
	key string
}

func (c pageCursor) String() string {
	s := strconv.FormatInt(c.at.UnixMicro(), 10) + "_" + strconv.FormatInt(c.id, 10)
	if c.key != "" {
		s += "_" + base64.RawURLEncoding.EncodeToString([]byte(c.key))
	}
	return s
}

// decode returns the page's cursor, or nil on the first page.
func (p Page) decode() (*pageCursor, error) {
	if p.After == "" {
		return nil, nil
	}
	parts := strings.SplitN(p.After, "_", 3)
	if len(parts) < 2 {
		return nil, invalidQuery("malformed page cursor")
	}
	u, err1 := strconv.ParseInt(parts[0], 10, 64)
	n, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, invalidQuery("malformed page cursor")
	}
	c := &pageCursor{at: time.UnixMicro(u).UTC(), id: n}
	if len(parts) == 3 {
		key, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil || len(key) == 0 || !utf8.Valid(key) {
			return nil, invalidQuery("malformed page cursor")
		}
		c.key = string(key)
	}
	return c, nil
}

// nextPage returns the page after rows (fetched with one row more than n, to know there is one).
func nextPage(n, got int, last func() pageCursor) Page {
	if got <= n {
		return Page{Limit: n}
	}
	return Page{Limit: n, After: last().String()}
}

// sqlArgs collects query parameters; p adds one and returns its placeholder.
type sqlArgs []any

func (a *sqlArgs) p(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// t adds a time bound. Postgres keeps microseconds and rounds finer times to the nearest
// one; rounding bounds up instead keeps "at >= from" and "at < to" exact for them.
func (a *sqlArgs) t(v time.Time) string { return a.p(ceilMicro(v)) }

func ceilMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); !r.Equal(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

func sqlWhere(preds []string) string {
	if len(preds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(preds, " AND ")
}

// allClients stands for "any client" where an index leads with client_id (see the top).
const allClients = `ANY (ARRAY(SELECT id FROM clients))`
