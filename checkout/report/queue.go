package report

// What the disputes and compensations queues share: a list in two parts, the cases still
// waiting (oldest first: the one waiting longest is the most urgent) and then the settled
// ones (newest settlement first), paged with one keyset cursor across both parts.

import (
	"context"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
)

// queueSpec is the SQL of a two-part queue. Either part may be left out (nil predicates):
// a filter for settled cases only lists no waiting ones.
type queueSpec struct {
	columns string                    // SELECT ... FROM ... JOIN ..., without WHERE
	narrow  func(a *sqlArgs) []string // predicates of both parts (the client, the order)
	waiting []string                  // the waiting part's predicates; nil: not listed
	waitAt  string                    // its sort column, ascending
	settled []string                  // the settled part's predicates; nil: not listed
	doneAt  string                    // its sort column (never NULL there), descending
	id      string                    // the tie-break column
}

// queueKey is where a row sorts in its queue.
type queueKey struct {
	waiting bool
	at      time.Time
	id      int64
}

// Cursor keys naming the part a cursor's row is in.
const (
	cursorWaiting = "w"
	cursorSettled = "s"
)

// listQueue returns one page of a two-part queue: the waiting part from the cursor on, then
// as much of the settled part as the page has room for.
func listQueue[T any](ctx context.Context, db sqlx.QueryerContext, s queueSpec, page Page, key func(T) queueKey) ([]T, Page, error) {
	c, err := page.decode()
	if err != nil {
		return nil, Page{}, err
	}
	if c != nil && c.key != cursorWaiting && c.key != cursorSettled {
		return nil, Page{}, invalidQuery("malformed page cursor")
	}
	n := page.size()
	var rows []T
	part := func(preds []string, col, dir, after string) error {
		var a sqlArgs
		preds = append(s.narrow(&a), preds...)
		op := ">"
		if dir == "DESC" {
			op = "<"
		}
		if c != nil && c.key == after {
			preds = append(preds, "("+col+", "+s.id+") "+op+" ("+a.t(c.at)+", "+a.p(c.id)+")")
		}
		var got []T
		q := s.columns + sqlWhere(preds) + " ORDER BY " + col + " " + dir + ", " + s.id + " " + dir +
			" LIMIT " + strconv.Itoa(n+1-len(rows))
		if err := sqlx.SelectContext(ctx, db, &got, q, a...); err != nil {
			return err
		}
		rows = append(rows, got...)
		return nil
	}
	if s.waiting != nil && (c == nil || c.key == cursorWaiting) {
		if err := part(s.waiting, s.waitAt, "ASC", cursorWaiting); err != nil {
			return nil, Page{}, err
		}
	}
	if s.settled != nil && len(rows) <= n {
		if err := part(s.settled, s.doneAt, "DESC", cursorSettled); err != nil {
			return nil, Page{}, err
		}
	}
	next := nextPage(n, len(rows), func() pageCursor {
		k := key(rows[n-1])
		pc := pageCursor{at: k.at, id: k.id, key: cursorSettled}
		if k.waiting {
			pc.key = cursorWaiting
		}
		return pc
	})
	if len(rows) > n {
		rows = rows[:n]
	}
	return rows, next, nil
}
