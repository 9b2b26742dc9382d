package report

// The console queries' tests. TestConsoleQueries seeds one fixture (fixture_test.go) per
// way of connecting and runs the tests of each topic (keys_test.go, events_test.go, ...)
// on it; TestConsolePlans (plan_test.go) checks the queries' plans at scale.

import (
	"os"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// consoleDBs returns fresh databases reached both ways the code may be: the way production
// connects (binary parameters, see db.DSN) and lib/pq's default.
func consoleDBs(t *testing.T) map[string]*sqlx.DB {
	t.Helper()
	text, err := sqlx.Connect("postgres", dbtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = text.Close() })
	return map[string]*sqlx.DB{"binary_parameters": dbtest.New(t), "text_parameters": text}
}

// collectPages pages through a list with pages of limit rows, checking the page size and the
// cursor of each page, and returns every row.
func collectPages[T any](t *testing.T, limit int, list func(Page) ([]T, Page, error)) []T {
	t.Helper()
	var all []T
	page := Page{Limit: limit}
	for i := 0; ; i++ {
		rows, nx, err := list(page)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) > limit {
			t.Fatalf("page %d has %d rows, limit %d", i, len(rows), limit)
		}
		all = append(all, rows...)
		if nx.After == "" {
			return all
		}
		if len(rows) != limit {
			t.Fatalf("page %d has %d rows and a next page", i, len(rows))
		}
		if i > 1000 {
			t.Fatal("pagination does not end")
		}
		page = nx
	}
}

// pageSizes are the page sizes to page through n rows with: small pages over a few rows,
// fewer round trips over many.
func pageSizes(n int) []int {
	if n > 60 {
		return []int{7, 50, MaxPageLimit}
	}
	return []int{1, 2, 7}
}

func rowIDs[T any](rows []T, id func(T) int64) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = id(r)
	}
	return out
}

func TestConsoleQueries(t *testing.T) {
	for mode, d := range consoleDBs(t) {
		t.Run(mode, func(t *testing.T) {
			f := seedConsole(t, d)
			t.Run("ListKeys", func(t *testing.T) { testListKeys(t, f) })
			t.Run("ExpiringKeys", func(t *testing.T) { testExpiringKeys(t, f) })
			t.Run("GetKey", func(t *testing.T) { testGetKey(t, f) })
			t.Run("Events", func(t *testing.T) { testEvents(t, f) })
			t.Run("Overview", func(t *testing.T) { testOverview(t, f) })
			t.Run("FindOrders", func(t *testing.T) { testFindOrders(t, f) })
			t.Run("SuspectedDoubleTaps", func(t *testing.T) { testDoubleTaps(t, f) })
		})
	}
}
