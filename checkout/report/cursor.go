package report

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

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

// The console keeps one list outside this package, the audit log of operator actions
// (package admin owns its table). It pages with the same opaque cursor as the lists here, so
// that every list of the console reads and links alike; these expose the cursor's parts.

// Size is the number of rows the page holds (Limit, bounded; DefaultPageLimit when unset).
func (p Page) Size() int { return p.size() }

// Cursor returns the (time, id) sort key that the page starts after; ok is false on the
// first page. A malformed cursor is an ErrInvalidQuery.
func (p Page) Cursor() (at time.Time, id int64, ok bool, err error) {
	c, err := p.decode()
	if err != nil || c == nil {
		return time.Time{}, 0, false, err
	}
	return c.at, c.id, true, nil
}

// NextPageAfter returns the page after a page of n rows whose query fetched got rows (one
// more than n when there are more) and whose last row sorts as (at, id). Its After is empty
// when there are no more rows.
func NextPageAfter(n, got int, at time.Time, id int64) Page {
	return nextPage(n, got, func() pageCursor { return pageCursor{at: at, id: id} })
}

// EachPage reads a list from its first page to its last, MaxPageLimit rows at a time,
// handing each page's rows to each before the next page is read: an export of the whole
// list holds one page in memory, however long the list. list is one of this package's
// paged reads with its filter bound (FindOrders, ListKeys, ListHistory…); the first page's
// error (a filter the list refuses, ErrInvalidQuery) is returned before each is called.
func EachPage[R any](ctx context.Context, list func(ctx context.Context, p Page) ([]R, Page, error), each func([]R) error) error {
	p := Page{Limit: MaxPageLimit}
	for {
		rows, next, err := list(ctx, p)
		if err != nil {
			return err
		}
		if err := each(rows); err != nil {
			return err
		}
		if next.After == "" || len(rows) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p = next
	}
}
