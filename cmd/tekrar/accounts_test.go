package main

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/migrations"
)

// migrationStatus runs `tekrar migrate status` and returns each migration file's state.
func migrationStatus(t *testing.T, dbURL string) map[string]string {
	t.Helper()
	stdout := mustRun(t, childEnv("DATABASE_URL="+dbURL), nil, "migrate", "status")
	states := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("status line %q is not: state file applied-at|pending", line)
		}
		if (f[0] == "pending") != (f[2] == "pending") {
			t.Fatalf("status line %q: state and applied time disagree", line)
		}
		if f[0] == "applied" {
			if _, err := time.Parse(time.RFC3339, f[2]); err != nil {
				t.Fatalf("status line %q: applied time: %v", line, err)
			}
		}
		states[f[1]] = f[0]
	}
	return states
}

func TestMigrateStatusDownUp(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	p, err := migrations.NewProvider(db.DB)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, s := range p.ListSources() {
		files = append(files, s.Path)
	}
	if len(files) < 2 {
		t.Fatalf("only %d migrations: %v", len(files), files)
	}
	last := files[len(files)-1]

	check := func(when string, pending string) {
		t.Helper()
		got := migrationStatus(t, dbURL)
		if len(got) != len(files) {
			t.Fatalf("%s: status lists %v, want %v", when, got, files)
		}
		for _, f := range files {
			want := "applied"
			if f == pending {
				want = "pending"
			}
			if got[f] != want {
				t.Errorf("%s: %s is %q, want %q", when, f, got[f], want)
			}
		}
	}
	check("fresh database", "")

	mustRun(t, childEnv("DATABASE_URL="+dbURL), nil, "migrate", "down")
	check("after down", last)

	out := mustRun(t, childEnv("DATABASE_URL="+dbURL), nil, "migrate", "up")
	if !strings.Contains(out, last) {
		t.Errorf("migrate up output does not name %s:\n%s", last, out)
	}
	check("after up", "")

	if out := mustRun(t, childEnv("DATABASE_URL="+dbURL), nil, "migrate", "up"); strings.TrimSpace(out) != "no pending migrations" {
		t.Errorf("second migrate up printed %q", out)
	}
	_, stderr, code := runTekrar(t, childEnv("DATABASE_URL="+dbURL), nil, "migrate", "sideways")
	if code == 0 {
		t.Fatal("migrate sideways succeeded")
	}
	if line := oneLine(t, "stderr", stderr); !strings.Contains(line, "sideways") {
		t.Errorf("stderr %q does not name the unknown command", line)
	}
}

func TestOperatorsCreate(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	env := childEnv("DATABASE_URL=" + dbURL)
	const password = "correct horse battery"

	// The password is the first line of stdin.
	out := mustRun(t, env, strings.NewReader(password+"\n"), "operators", "create", "--role", "admin", "Ops@Example.com")
	if strings.TrimSpace(out) != "operator ops@example.com set (role admin)" {
		t.Errorf("operators create printed %q", out)
	}
	var op struct {
		Hash string `db:"password_hash"`
		Role string `db:"role"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.GetContext(ctx, &op, `SELECT password_hash, role FROM operators WHERE email = 'ops@example.com'`); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(op.Hash, "$2") || strings.Contains(op.Hash, password) {
		t.Errorf("password_hash %q is not a bcrypt hash of the password", op.Hash)
	}
	if op.Role != "admin" {
		t.Errorf("role %q, want admin", op.Role)
	}

	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"too short", "short\n", []string{"operators", "create", "--role", "admin", "short@example.com"}, "at least"},
		{"no password", "", []string{"operators", "create", "nopass@example.com"}, "password"},
		{"no email", password + "\n", []string{"operators", "create", "--role", "admin"}, "operators create EMAIL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runTekrar(t, env, strings.NewReader(tc.stdin), tc.args...)
			if code == 0 {
				t.Fatalf("exit 0, want a failure; stdout %q", stdout)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if line := oneLine(t, "stderr", stderr); !strings.Contains(line, tc.want) {
				t.Errorf("stderr %q does not mention %q", line, tc.want)
			}
			if n := countRows(t, db, `SELECT count(*) FROM operators`); n != 1 {
				t.Errorf("%d operators, want only the first", n)
			}
		})
	}
}

func TestClientsCreateAndUpdateSettings(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	env := childEnv("DATABASE_URL=" + dbURL)

	secret := strings.TrimSpace(mustRun(t, env, nil, "clients", "create", "--key-ttl", "48h", "--tombstone-grace", "7d", "POS fleet"))
	if !strings.HasPrefix(secret, "tekrar_sk_") || strings.Contains(secret, "\n") {
		t.Fatalf("clients create printed %q", secret)
	}
	settings := func() (ttl, grace float64, id int64) {
		t.Helper()
		if err := db.QueryRow(`SELECT extract(epoch FROM key_ttl), extract(epoch FROM tombstone_grace), id FROM clients WHERE name = 'POS fleet'`).Scan(&ttl, &grace, &id); err != nil {
			t.Fatal(err)
		}
		return
	}
	ttl, grace, id := settings()
	if ttl != 48*3600 || grace != 7*24*3600 {
		t.Fatalf("created with TTL %vs, grace %vs", ttl, grace)
	}
	mustRun(t, env, nil, "clients", "update", "--key-ttl", "90d", strconv.FormatInt(id, 10))
	if ttl, grace, _ = settings(); ttl != 90*24*3600 || grace != 7*24*3600 {
		t.Fatalf("after update: TTL %vs, grace %vs", ttl, grace)
	}
	zone := func() (z string) {
		t.Helper()
		if err := db.QueryRow(`SELECT time_zone FROM clients WHERE id = $1`, id).Scan(&z); err != nil {
			t.Fatal(err)
		}
		return z
	}
	if z := zone(); z != "UTC" {
		t.Fatalf("a new client's time zone is %q, want UTC", z)
	}
	mustRun(t, env, nil, "clients", "update", "--time-zone", "Europe/Istanbul", strconv.FormatInt(id, 10))
	if z := zone(); z != "Europe/Istanbul" {
		t.Fatalf("after update: time zone %q", z)
	}
	contact := func() (c sql.NullString) {
		t.Helper()
		if err := db.QueryRow(`SELECT contact_email FROM clients WHERE id = $1`, id).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := contact(); c.Valid {
		t.Fatalf("a new client's contact e-mail is %q, want none", c.String)
	}
	mustRun(t, env, nil, "clients", "update", "--contact-email", "ops@shop.example", strconv.FormatInt(id, 10))
	if c := contact(); c.String != "ops@shop.example" {
		t.Fatalf("after update: contact e-mail %q", c.String)
	}

	// Out of bounds is refused at configuration time, in one line, changing nothing.
	for _, args := range [][]string{
		{"clients", "create", "--key-ttl", "30s", "too short"},
		{"clients", "create", "--key-ttl", "91d", "too long"},
		{"clients", "create", "--tombstone-grace", "10m", "grace too short"},
		{"clients", "update", "--key-ttl", "59s", strconv.FormatInt(id, 10)},
		{"clients", "update", "--time-zone", "Mars/Olympus", strconv.FormatInt(id, 10)},
		{"clients", "update", "--time-zone", "Local", strconv.FormatInt(id, 10)},
		{"clients", "create", "--time-zone", "+03:00", "bad zone"},
		{"clients", "update", "--contact-email", "ops@localhost", strconv.FormatInt(id, 10)},
		{"clients", "update", "--contact-email", "ops@[10.0.0.1]", strconv.FormatInt(id, 10)},
		{"clients", "update", "--contact-email", "a%b@shop.example", strconv.FormatInt(id, 10)},
		{"clients", "update", "--contact-email", "Ops <ops@shop.example>", strconv.FormatInt(id, 10)},
	} {
		stdout, stderr, code := runTekrar(t, env, nil, args...)
		if code == 0 || stdout != "" {
			t.Fatalf("tekrar %v: exit %d, stdout %q", args, code, stdout)
		}
		oneLine(t, "stderr of "+strings.Join(args, " "), stderr)
	}
	if n := countRows(t, db, `SELECT count(*) FROM clients`); n != 1 {
		t.Fatalf("%d clients, want 1", n)
	}
	if ttl, _, _ = settings(); ttl != 90*24*3600 {
		t.Fatalf("a refused update changed the TTL to %vs", ttl)
	}
	if z := zone(); z != "Europe/Istanbul" {
		t.Fatalf("a refused update changed the time zone to %q", z)
	}
	if c := contact(); c.String != "ops@shop.example" {
		t.Fatalf("a refused update changed the contact e-mail to %q", c.String)
	}
	mustRun(t, env, nil, "clients", "update", "--contact-email", "none", strconv.FormatInt(id, 10))
	if c := contact(); c.Valid {
		t.Fatalf("--contact-email none left %q", c.String)
	}
}

// TestOperatorsResetEndsSessions: resetting a password kept the operator's sessions valid,
// so whoever had signed in with the old password stayed signed in. Running create again
// for an email resets the password and ends that operator's sessions, and no one else's.
func TestOperatorsResetEndsSessions(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	env := childEnv("DATABASE_URL=" + dbURL)
	const password = "correct horse battery"
	for _, email := range []string{"ops@example.com", "other@example.com"} {
		mustRun(t, env, strings.NewReader(password+"\n"), "operators", "create", "--role", "admin", email)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, `
		INSERT INTO operator_sessions (token_hash, operator_id, csrf_token, created_at, expires_at)
		SELECT sha256(convert_to(o.email || n, 'UTF8')), o.id, 'csrf', now(), now() + interval '1 hour'
		  FROM operators o, generate_series(1, 2) n`); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, strings.NewReader("a new password!\n"), "operators", "create", "--role", "viewer", "ops@example.com")
	if n := countRows(t, db, `SELECT count(*) FROM operator_sessions s JOIN operators o ON o.id = s.operator_id WHERE o.email = 'ops@example.com'`); n != 0 {
		t.Errorf("%d sessions of the reset operator left", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM operator_sessions s JOIN operators o ON o.id = s.operator_id WHERE o.email = 'other@example.com'`); n != 2 {
		t.Errorf("%d sessions of the other operator, want 2", n)
	}
}
