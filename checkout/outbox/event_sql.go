package outbox

import (
	"fmt"
	"slices"
)

// InsertSQL is the one statement that inserts events: every row of new_events becomes an
// event, with its dispatch job (the trigger of migration 19). It has no parameters of its
// own, so that both named and numbered statements can splice it. A statement that writes
// events defines, before it, the CTE
//
//	new_events (client_id, type, order_id, payload, created_at) AS (SELECT …)
//
// (bigint, text, bigint, jsonb, timestamptz; the types as TypeSQL literals, two kinds of
// events as a UNION ALL) and splices InsertSQL as its data-modifying CTE, e AS (InsertSQL),
// or as its main statement. See the package documentation for why it is shaped so.
const InsertSQL = `
	INSERT INTO outbox_events (client_id, type, order_id, payload, created_at)
	SELECT client_id, type, order_id, payload, created_at FROM new_events`

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
	RETURNING id, created_at`
