package migrations_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/migrations"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// schemaSQL describes the public schema as sorted lines: columns with their types, defaults
// and nullability, constraints, indexes, domains, triggers and functions. Two databases
// with the same lines have the same schema, whatever order it was built in.
const schemaSQL = `
SELECT coalesce(string_agg(line, E'\n' ORDER BY line), '') FROM (
    SELECT format('column %s.%s %s not_null=%s default=%s identity=%s', c.relname, a.attname,
                  format_type(a.atttypid, a.atttypmod), a.attnotnull,
                  coalesce(pg_get_expr(d.adbin, d.adrelid), '-'), a.attidentity) AS line
      FROM pg_attribute a
      JOIN pg_class c ON c.oid = a.attrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v') AND a.attnum > 0
       AND NOT a.attisdropped AND c.relname <> 'goose_db_version'
    UNION ALL
    SELECT format('constraint %s.%s %s', c.relname, k.conname, pg_get_constraintdef(k.oid))
      FROM pg_constraint k
      JOIN pg_class c ON c.oid = k.conrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relname <> 'goose_db_version'
    UNION ALL
    SELECT format('index %s', pg_get_indexdef(i.indexrelid))
      FROM pg_index i
      JOIN pg_class c ON c.oid = i.indrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relname <> 'goose_db_version'
    UNION ALL
    SELECT format('domain %s %s %s', t.typname, format_type(t.typbasetype, t.typtypmod),
                  coalesce((SELECT string_agg(pg_get_constraintdef(k.oid), ' ' ORDER BY k.conname)
                              FROM pg_constraint k WHERE k.contypid = t.oid), ''))
      FROM pg_type t
      JOIN pg_namespace n ON n.oid = t.typnamespace
     WHERE n.nspname = 'public' AND t.typtype = 'd'
    UNION ALL
    SELECT format('trigger %s', pg_get_triggerdef(g.oid))
      FROM pg_trigger g
      JOIN pg_class c ON c.oid = g.tgrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND NOT g.tgisinternal
    UNION ALL
    SELECT format('function %s', pg_get_functiondef(p.oid))
      FROM pg_proc p
      JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'public'
) lines`

// TestEveryDownRestoresThePreviousSchema takes a migrated database down to nothing, up
// again one migration at a time, then down one at a time, and checks that after each Down
// the schema is exactly what it was at that version on the way up. A Down that forgets a
// constraint, leaves a domain behind or restores a rule with another definition fails here.
func TestEveryDownRestoresThePreviousSchema(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := migrations.NewProvider(d.DB)
	if err != nil {
		t.Fatal(err)
	}
	schema := func() string {
		t.Helper()
		var s string
		if err := d.GetContext(ctx, &s, schemaSQL); err != nil {
			t.Fatal(err)
		}
		return s
	}
	version := func() int64 {
		t.Helper()
		v, err := p.GetDBVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	migrated := schema()
	if migrated == "" {
		t.Fatal("the migrated database has no schema")
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down to 0: %v", err)
	}
	if s := schema(); s != "" {
		t.Fatalf("after every Down, left behind:\n%s", s)
	}
	up := map[int64]string{0: ""}
	var last int64
	for {
		r, err := p.UpByOne(ctx)
		if err != nil {
			break // goose.ErrNoNextVersion once all are applied; a failure shows below
		}
		last = r.Source.Version
		up[last] = schema()
	}
	if sources := p.ListSources(); last != sources[len(sources)-1].Version {
		t.Fatalf("up one by one stopped at version %d of %d", last, sources[len(sources)-1].Version)
	}
	if up[last] != migrated {
		t.Fatalf("migrations applied one by one give another schema than the test template:\n%s", diff(migrated, up[last]))
	}
	for version() > 0 {
		r, err := p.Down(ctx)
		if err != nil {
			t.Fatalf("down from %d: %v", version(), err)
		}
		at := version()
		if got := schema(); got != up[at] {
			t.Fatalf("Down of %s leaves another schema than version %d had:\n%s", r.Source.Path, at, diff(up[at], got))
		}
	}
}

// diff lists the lines only in want (-) and only in got (+).
func diff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range splitLines(s) {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var out string
	for _, l := range splitLines(want) {
		if !g[l] {
			out += "- " + l + "\n"
		}
	}
	for _, l := range splitLines(got) {
		if !w[l] {
			out += "+ " + l + "\n"
		}
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
