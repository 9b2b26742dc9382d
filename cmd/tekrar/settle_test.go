package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestSettleTwiceAtOnce: two real `tekrar settle` processes at once, for every client of a
// database with thousands of movements on the day, in three rounds. Each day of each client
// is settled once (one row, one process says it wrote it), both print the same totals, and
// a refund recorded afterwards with a time inside the day is printed as waiting by a rerun
// and counted by the next day's settlement as an adjustment.
func TestSettleTwiceAtOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	env := childEnv("DATABASE_URL="+dbURL, "TEKRAR_LOG_LEVEL=warn")
	for _, zone := range []string{"Europe/Istanbul", "UTC", "America/New_York"} {
		newClientSecret(t, dbURL, zone)
	}
	if _, err := db.Exec(`
		UPDATE clients SET created_at = '2026-01-01', time_zone = name;
		-- 1,500 paid orders per client across 10 and 11 March (UTC), and a refund of every tenth.
		INSERT INTO orders (client_id, status, amount, currency, items, captured_amount, created_at, updated_at)
		SELECT c.id, 'paid', 100 + i, 'TRY', '[]', 100 + i,
		       timestamptz '2026-03-10 00:00Z' + i * interval '1 minute', timestamptz '2026-03-10 00:00Z' + i * interval '1 minute'
		  FROM clients c, generate_series(1, 1500) i;
		INSERT INTO payments (order_id, provider_charge_id, provider_key, amount, currency, status, created_at)
		SELECT id, 'ch_' || id, 'pk-' || id, amount, currency, 'succeeded', created_at FROM orders;
		INSERT INTO refunds (order_id, client_id, amount, currency, status, provider_key, created_at, updated_at)
		SELECT id, client_id, 50, currency, 'succeeded', 'rk-' || id, created_at + interval '30 minutes',
		       created_at + interval '30 minutes'
		  FROM orders WHERE id % 10 = 0`); err != nil {
		t.Fatal(err)
	}

	atOnce := func(day string) (a, b string) {
		t.Helper()
		p := startTekrar(t, env, nil, "settle", "--date", day)
		q := startTekrar(t, env, nil, "settle", "--date", day)
		for _, r := range []*proc{p, q} {
			if code := r.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("settle --date %s exited %d\nstdout:\n%s\nstderr:\n%s", day, code, r.stdout, r.stderr)
			}
		}
		return p.stdout.String(), q.stdout.String()
	}
	// A settlement's line without the words that say who wrote it.
	figures := func(out string) []string {
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			l = strings.Replace(l, "written now", "", 1)
			if i := strings.Index(l, "written at "); i >= 0 {
				l = l[:i] + l[i+len("written at 2026-12-03T18:00:00Z, unchanged"):]
			}
			lines = append(lines, l)
		}
		return lines
	}
	for round := range 3 {
		a, b := atOnce("2026-03-10")
		if fa, fb := figures(a), figures(b); strings.Join(fa, "\n") != strings.Join(fb, "\n") || len(fa) != 3 {
			t.Fatalf("round %d: the two processes disagree, or did not settle 3 clients:\n%s\n---\n%s", round, a, b)
		}
		wrote := strings.Count(a+b, "written now")
		if want := map[int]int{0: 3}[round]; wrote != want {
			t.Fatalf("round %d: %d settlements written now, want %d:\n%s\n---\n%s", round, wrote, want, a, b)
		}
		if n := countRows(t, db, `SELECT count(*) FROM settlements`); n != 3 {
			t.Fatalf("round %d: %d settlements, want 3 (one per client)", round, n)
		}
	}
	// Every movement of the day counted once, whichever process claimed it.
	if n, want := countRows(t, db, `SELECT count(*) FROM settlement_items`), countRows(t, db, `
		SELECT (SELECT count(*) FROM payments p JOIN orders o ON o.id = p.order_id JOIN clients c ON c.id = o.client_id
		         WHERE (p.created_at AT TIME ZONE c.time_zone)::date = '2026-03-10')
		     + (SELECT count(*) FROM refunds r JOIN clients c ON c.id = r.client_id
		         WHERE (r.updated_at AT TIME ZONE c.time_zone)::date = '2026-03-10')`); n != want {
		t.Fatalf("%d movements claimed, want the day's %d", n, want)
	}
	istanbul := `(SELECT id FROM clients WHERE name = 'Europe/Istanbul')`
	if _, err := db.Exec(`
		INSERT INTO refunds (order_id, client_id, amount, currency, status, provider_key, created_at, updated_at)
		SELECT id, client_id, 7, currency, 'succeeded', 'rk-late', '2026-03-10 20:59:00Z', '2026-03-10 20:59:00Z'
		  FROM orders WHERE client_id = ` + istanbul + ` ORDER BY id LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, env, nil, "settle", "--date", "2026-03-10", "--client", "1")
	if !strings.Contains(out, "unchanged") || !strings.Contains(out, "1 late movements wait for the next settlement") {
		t.Fatalf("rerun after a late refund:\n%s", out)
	}
	a, b := atOnce("2026-03-11")
	if got := strings.Count(a+b, "1 adjustments"); got != 2 {
		t.Fatalf("the next day's settlement should count the late refund once, and both processes print it:\n%s\n---\n%s", a, b)
	}
	if n := countRows(t, db, `SELECT count(*) FROM settlement_items WHERE adjusted AND day = '2026-03-10' AND amount = 7`); n != 1 {
		t.Fatalf("%d adjustments of the late refund, want 1", n)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"settle"}, 2, "--date is required"},
		{[]string{"settle", "--date", "2027-02-29"}, 2, "is not a date"},
		{[]string{"settle", "--date", "2099-01-01", "--client", "1"}, 1, "has not ended"},
		{[]string{"settle", "--date", "2026-03-10", "--client", "99"}, 1, "no such client"},
	} {
		_, stderr, code := runTekrar(t, env, nil, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("tekrar %v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
