package checkout

import "time"

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
