package catalog_test

import (
	"os"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/catalog"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// fixture is a catalog on a fresh migrated database, with a fixed clock.
type fixture struct {
	db    *sqlx.DB
	store *catalog.Store
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{db: dbtest.New(t), now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	f.store = catalog.New(f.db, func() time.Time { return f.now })
	return f
}

// client inserts a client and returns its id.
func (f *fixture) client(t *testing.T, name string) int64 {
	t.Helper()
	return checkouttest.ClientRow(t, f.db, name)
}
