package checkout

import (
	"database/sql"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestNamedStatements checks the binding of named statements: numbered in the order the
// names first appear (a name used twice is one parameter), the same text
// for every call (so internal/db.Prepared prepares it once), and a panic, at package load,
// for a name the parameter struct lacks or a "::" cast, which sqlx would turn into ":".
func TestNamedStatements(t *testing.T) {
	type params struct {
		ID    int64          `db:"id"`
		Now   time.Time      `db:"now"`
		Note  sql.NullString `db:"note"`
		Other string         `db:"other"`
	}
	st := named[params](`UPDATE t SET a = :now, b = CAST(:note AS text) WHERE id = :id AND c <= :now`)
	if want := `UPDATE t SET a = $1, b = CAST($2 AS text) WHERE id = $3 AND c <= $1`; st.text != want {
		t.Fatalf("text %q, want %q", st.text, want)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got := st.args(&params{ID: 7, Now: at, Note: sql.NullString{String: "x", Valid: true}})
	want := []any{at, sql.NullString{String: "x", Valid: true}, int64(7)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("args %#v, want %#v", got, want)
	}

	for _, bad := range []string{
		`SELECT :missing`,
		`SELECT :id::text`,
		`SELECT 1 -- a comment: with a colon`,
		`SELECT :id, $2`,
	} {
		t.Run(bad, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("named(%q) did not panic", bad)
				}
			}()
			named[params](bad)
		})
	}

	// Every statement of the package was bound when it loaded; none kept a name.
	for name, text := range map[string]string{
		"claimOrder": claimOrderSQL.text, "completeOrder": completeOrderSQL.text, "cancelOrder": cancelOrderSQL.text,
		"completeRefund": completeRefundSQL.text, "refundTombstone": refundTombstoneSQL.text,
		"claimRefundKey": claimRefundKeySQL.text, "reserveRefund": reserveRefundSQL.text,
		"createRefund": createRefundSQL.text, "settleCompensation": settleCompensationSQL.text,
		"oweRefund": oweRefundSQL.text, "insertEvents": insertEventsSQL.text,
	} {
		if i := strings.IndexByte(text, ':'); i >= 0 {
			t.Errorf("%s: a ':' is left at %d:\n%s", name, i, text)
		}
	}
}
