package db

import (
	"database/sql"
	"reflect"
	"testing"
	"time"
)

// TestNamed checks the binding of named statements: numbered in the order the
// names first appear (a name used twice is one parameter), the same text
// for every call (so Prepared prepares it once), and a panic, at package load,
// for a name the parameter struct lacks or a "::" cast, which sqlx would turn into ":".
func TestNamed(t *testing.T) {
	type params struct {
		ID    int64          `db:"id"`
		Now   time.Time      `db:"now"`
		Note  sql.NullString `db:"note"`
		Other string         `db:"other"`
	}
	st := Named[params](`UPDATE t SET a = :now, b = CAST(:note AS text) WHERE id = :id AND c <= :now`)
	if want := `UPDATE t SET a = $1, b = CAST($2 AS text) WHERE id = $3 AND c <= $1`; st.Text != want {
		t.Fatalf("text %q, want %q", st.Text, want)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got := st.Args(&params{ID: 7, Now: at, Note: sql.NullString{String: "x", Valid: true}})
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
			Named[params](bad)
		})
	}
}
