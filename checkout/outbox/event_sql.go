package outbox

import (
	"fmt"
	"slices"
)

// InsertSQL is the one statement that inserts events: every row of new_events becomes an
// event, queued for dispatch (the trigger of migrations 19 and 48). It has no parameters of its
// own, so that both named and numbered statements can splice it. A statement that writes
// events defines, before it, the CTE
//
//	new_events (client_id, type, order_id, payload, created_at) AS (SELECT …)
//
// (bigint, text, bigint, jsonb, timestamptz; the types as TypeSQL literals, two kinds of
// events as a UNION ALL) and splices InsertSQL as its data-modifying CTE, e AS (InsertSQL),
// or as its main statement. See the package documentation for why it is shaped so.
//
// It adds the order's next sequence to the payload of each event about an order
// (next_event_sequence, migration 43: one more than the order's last, under its row lock
// until the transaction commits), so that every channel, retry and redelivery carries the
// number the event was written with. A statement that updates the order's row does so
// upstream of its new_events (new_events reads the update's RETURNING), as every one does:
// the sequence's UPDATE of the row must come after it.
const InsertSQL = `
	INSERT INTO outbox_events (client_id, type, order_id, payload, created_at)
	SELECT client_id, type, order_id,
	       CASE WHEN order_id IS NULL THEN payload
	            ELSE payload || jsonb_build_object('` + SequenceField + `', next_event_sequence(order_id)) END,
	       created_at
	  FROM new_events`

// SequenceField is the field of an event's data that holds its order's sequence: 1 for the
// order's first event, one more for each later one, in the order their changes committed.
// A consumer keeps the highest it has applied per order; a lower one is an older event.
const SequenceField = "sequence"

// TypeSQL returns an event type as an SQL literal, for a statement's new_events. It panics
// on a type not in Types: statements are package variables, so a mistake stops every test
// at once.
func TypeSQL(typ string) string {
	if !slices.Contains(Types, typ) {
		panic(fmt.Sprintf("outbox: no event type %q", typ))
	}
	return "'" + typ + "'"
}

// insertSQL is Insert's statement: one event, from parameters, written by InsertSQL.
const insertSQL = `
	WITH new_events (client_id, type, order_id, payload, created_at) AS (
	    VALUES (CAST($1 AS bigint), CAST($2 AS text), CAST($3 AS bigint), CAST($4 AS jsonb), now())
	)` + InsertSQL + `
	RETURNING id, payload, created_at`
