package report

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// A reader of a real streaming standby, connected as a role that is no superuser, reads what the primary wrote once it is replayed, and
// its Lag says "up to date" then; with replay paused, a row written since is absent (not an
// error) and Lag says how far behind it is. A reader of the primary's pool, and a read URL
// that reached the primary, have no lag to show.
func TestReaderOnAStandby(t *testing.T) {
	pair := dbtest.NewPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// tekrar's own role is no superuser: the lag must be measurable without one.
	for _, q := range []string{`CREATE ROLE console LOGIN`, `GRANT SELECT ON clients TO console`} {
		if _, err := pair.Primary.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	pair.CatchUp(t)
	asConsole, err := sqlx.Connect("postgres", strings.Replace(pair.StandbyURL, "//postgres@", "//console@", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer asConsole.Close()
	standby := StandbyReader(asConsole)
	addClient := func(name string) {
		t.Helper()
		if _, err := pair.Primary.ExecContext(ctx, `INSERT INTO clients (name, secret_hash) VALUES ($1::text, sha256(convert_to($1::text, 'UTF8')))`, name); err != nil {
			t.Fatal(err)
		}
	}
	clientOnStandby := func(name string) bool {
		t.Helper()
		var n int
		if err := standby.QueryRowxContext(ctx, `SELECT count(*) FROM clients WHERE name = $1`, name).Scan(&n); err != nil {
			t.Fatalf("read the standby: %v", err)
		}
		return n == 1
	}
	lag := func() Lag {
		t.Helper()
		l, err := standby.Lag(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	addClient("replayed shop")
	pair.CatchUp(t)
	if !clientOnStandby("replayed shop") {
		t.Fatal("a replayed row is not on the standby")
	}
	// The WAL receiver may report a moment after replay; wait for both.
	deadline := time.Now().Add(10 * time.Second)
	for l := lag(); !l.CaughtUp; l = lag() {
		if time.Now().After(deadline) {
			t.Fatalf("caught-up standby: Lag %+v", l)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := lag().String(); s != "read from a standby, up to date" {
		t.Errorf("caught-up standby says %q", s)
	}

	if _, err := pair.Standby.ExecContext(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pair.Standby.Exec(`SELECT pg_wal_replay_resume()`) })
	addClient("unreplayed shop")
	deadline = time.Now().Add(10 * time.Second)
	l := lag()
	for ; l.CaughtUp; l = lag() { // received, not replayed
		if time.Now().After(deadline) {
			t.Fatalf("paused standby still caught up: %+v", l)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !l.Standby || !l.Receiving || !strings.HasSuffix(l.String(), " s behind") {
		t.Errorf("paused standby: %+v says %q, want a lag in seconds", l, l.String())
	}
	if clientOnStandby("unreplayed shop") {
		t.Error("a row not yet replayed is on the standby")
	}
	if _, err := pair.Standby.ExecContext(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	pair.CatchUp(t)
	if !clientOnStandby("unreplayed shop") {
		t.Error("the row is not on the standby after replay resumed")
	}

	for name, r := range map[string]Reader{"primary's pool": PrimaryReader(pair.Primary), "read URL on the primary": StandbyReader(pair.Primary)} {
		if l, err := r.Lag(ctx); err != nil || l != (Lag{}) || l.String() != "" {
			t.Errorf("%s: Lag %+v %v, says %q; want nothing to show", name, l, err, l.String())
		}
	}
}

func TestLagSays(t *testing.T) {
	tests := []struct {
		lag  Lag
		want string
	}{
		{Lag{}, ""},
		{Lag{Standby: true, CaughtUp: true, Receiving: true, Known: true, Behind: time.Hour}, "read from a standby, up to date"},
		{Lag{Standby: true, Receiving: true, Known: true, Behind: 2500 * time.Millisecond}, "read from a standby, 3 s behind"},
		{Lag{Standby: true, Receiving: true, Known: true, Behind: 0}, "read from a standby, 1 s behind"},
		{Lag{Standby: true, Receiving: true}, "read from a standby, behind the primary by an unknown time"},
		{Lag{Standby: true, Known: true, Behind: 90 * time.Second}, "read from a standby that is not receiving from the primary; its last replayed change is 90 s old"},
		{Lag{Standby: true}, "read from a standby that is not receiving from the primary"},
	}
	for _, tt := range tests {
		if got := tt.lag.String(); got != tt.want {
			t.Errorf("%+v says %q, want %q", tt.lag, got, tt.want)
		}
	}
}
