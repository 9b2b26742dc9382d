package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/clients"
)

// copySeed writes completed keys straight into a tekrar database with COPY, for the growth
// run's millions of keys: through the API they would take hours. Key n is the key replay
// mode sends (l.key(n), l.body(n)), so the measured requests replay what was seeded, and it
// comes with what a first arrival that was charged leaves behind: its order (paid), its
// payment, its key row with the stored 201 (the API's own OrderView, encoded as the API
// does), the key history's created and completed entries and the order.paid event. Not
// written: the sandbox provider's ledger (a real provider keeps its own), the River job of
// the event (dispatched and deleted long ago), the card's identity at the provider and the
// intent (NULL, as for a key the provider did not identify and a key made before intents:
// a completed key's replay reads neither).
type copySeed struct {
	l        *loader
	clientID int64
	ttl      time.Duration
	scope    checkout.FingerprintSpec // the API's spec of POST /v1/orders
}

// seedChunk is how many keys one transaction writes: a failure costs at most that much.
const seedChunk = 50000

// orderPath is the path the load tool posts to and the fingerprint covers.
const orderPath = "/v1/orders"

// newCopySeed finds the client that l's secret authenticates.
func newCopySeed(ctx context.Context, db *sql.DB, l *loader) (*copySeed, error) {
	s := &copySeed{l: l, scope: api.FingerprintSpecs[0]}
	if s.scope.Method != "POST" || s.scope.Route != orderPath {
		return nil, fmt.Errorf("the API's first keyed route is %s %s, not POST %s", s.scope.Method, s.scope.Route, orderPath)
	}
	h := clients.Hash(l.secret)
	var ttl float64
	err := db.QueryRowContext(ctx, seedClientSQL, h[:]).
		Scan(&s.clientID, &ttl)
	if err != nil {
		return nil, fmt.Errorf("the secret's client: %w", err)
	}
	s.ttl = time.Duration(ttl * float64(time.Second))
	return s, nil
}

// seed writes keys [from, to), created evenly from first to last (expiring the client's
// key TTL later), in transactions of seedChunk keys. Order and key ids are taken from their
// sequences in one block; run it while nothing else claims keys. A superuser's session
// skips the foreign-key checks (every id it writes is one it wrote the line before); CHECK
// and unique constraints, and the key history's count triggers, apply as usual. The indexes
// stay in place: dropping the secondary ones for the load and building them again after it
// was slower (most are appended to, in time and id order).
func (s *copySeed) seed(ctx context.Context, db *sql.DB, from, to int64, first, last time.Time) error {
	n := to - from
	if n <= 0 {
		return nil
	}
	var orderBase, keyBase int64
	if err := db.QueryRowContext(ctx, seedReserveIDsSQL, n).Scan(&orderBase, &keyBase); err != nil {
		return fmt.Errorf("reserve ids: %w", err)
	}
	var super bool
	if err := db.QueryRowContext(ctx, seedSuperuserSQL).Scan(&super); err != nil {
		return fmt.Errorf("role: %w", err)
	}
	step := time.Duration(0)
	if n > 1 {
		step = last.Sub(first) / time.Duration(n-1)
	}
	for lo := from; lo < to; lo += seedChunk {
		hi := min(lo+seedChunk, to)
		err := s.chunk(ctx, db, super, lo, hi, func(i int64) (int64, int64, time.Time) {
			// Postgres keeps microseconds: the stored answer's created_at must be the order's.
			return orderBase + i - from, keyBase + i - from, first.Add(time.Duration(i-from) * step).Truncate(time.Microsecond)
		})
		if err != nil {
			return fmt.Errorf("seed keys %d to %d: %w", lo, hi, err)
		}
	}
	return nil
}

// rows are one key's rows, one slice of values per table of seedTables.
func (s *copySeed) rows(n, orderID, keyID int64, created time.Time) ([5][][]any, error) {
	var out [5][][]any
	body := s.l.body(n)
	fp, err := checkout.Fingerprint(s.scope.Method, orderPath, body)
	if err != nil {
		return out, err
	}
	scope, _, err := s.scope.Scope(orderPath, body, nil)
	if err != nil {
		return out, err
	}
	in := s.l.order(n)
	// The public ids are unique per client, run and key, as the keys are.
	id := sha256.Sum256(fmt.Appendf(nil, "tekrar-load seed %d %s %d", s.clientID, s.l.run, n))
	hx := hex.EncodeToString(id[:])
	publicID, chargeID, eventID := "ord_"+hx[:32], "ch_"+hx[32:56], "evt_"+hx[32:64]
	completed := created.Add(40 * time.Millisecond)
	items := make([]checkout.Item, len(in.Items))
	for i, it := range in.Items {
		items[i] = checkout.Item{SKU: it.SKU, Name: it.Name, Quantity: it.Quantity, UnitAmount: it.UnitAmount}
	}
	view := checkout.OrderView{ID: publicID, Status: "paid", Amount: in.Amount, Currency: in.Currency, Items: items,
		Customer:  &checkout.Customer{ID: in.Customer.ID},
		Payment:   &checkout.PaymentView{ID: chargeID, Status: "succeeded", CardBrand: "visa", CardLast4: "4242"},
		CreatedAt: created.UTC()}
	resp, err := json.Marshal(view)
	if err != nil {
		return out, err
	}
	itemsJSON, err := json.Marshal(items)
	if err != nil {
		return out, err
	}
	key := s.l.key(n)
	reqID := hx[:16]
	detail := `{"order_id": "` + publicID + `"}`
	out[0] = [][]any{{orderID, s.clientID, "paid", in.Amount, in.Currency, string(itemsJSON), in.Customer.ID, in.Amount,
		created, completed, publicID, 1}}
	out[1] = [][]any{{orderID, chargeID, "tekrar_ch_" + hx[:32], in.Amount, in.Currency, "succeeded", "visa", "4242", completed}}
	out[2] = [][]any{{keyID, s.clientID, key, fp[:], scope[:], s.scope.Method, orderPath, "completed", "finished", orderID, 201,
		`{"Content-Type": "application/json"}`, resp, created, completed, created.Add(s.ttl)}}
	out[3] = [][]any{
		{completed, s.clientID, key, keyID, "created", 201, reqID, "127.0.0.1", "tekrar-load", detail},
		{completed, s.clientID, key, keyID, "completed", 201, reqID, "127.0.0.1", "tekrar-load", detail},
	}
	out[4] = [][]any{{eventID, s.clientID, "order.paid", orderID,
		fmt.Sprintf(`{"order": "%s", "amount": %d, "status": "paid", "currency": "%s", "sequence": 1}`, publicID, in.Amount, in.Currency),
		completed}}
	return out, nil
}

// chunk writes keys [lo, hi) in one transaction, a COPY per table.
func (s *copySeed) chunk(ctx context.Context, db *sql.DB, super bool, lo, hi int64, ids func(int64) (orderID, keyID int64, created time.Time)) error {
	rows := make([][][]any, len(seedTables))
	for n := lo; n < hi; n++ {
		orderID, keyID, created := ids(n)
		r, err := s.rows(n, orderID, keyID, created)
		if err != nil {
			return fmt.Errorf("key %d: %w", n, err)
		}
		for t := range seedTables {
			rows[t] = append(rows[t], r[t]...)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	set := seedSessionSQL
	if super {
		set += "; " + seedNoForeignKeysSQL
	}
	if _, err := tx.ExecContext(ctx, set); err != nil {
		return err
	}
	for t, st := range seedTables {
		stmt, err := tx.PrepareContext(ctx, pq.CopyIn(st.table, st.cols...))
		if err != nil {
			return fmt.Errorf("copy %s: %w", st.table, err)
		}
		for _, r := range rows[t] {
			if _, err := stmt.ExecContext(ctx, r...); err != nil {
				stmt.Close()
				return fmt.Errorf("copy %s: %w", st.table, err)
			}
		}
		if _, err := stmt.ExecContext(ctx); err != nil {
			stmt.Close()
			return fmt.Errorf("copy %s: %w", st.table, err)
		}
		if err := stmt.Close(); err != nil {
			return fmt.Errorf("copy %s: %w", st.table, err)
		}
	}
	return tx.Commit()
}

// seedCopyMain seeds keys 0 to live-1 of l's run, created over the client's key TTL but its
// last two hours, up to a minute ago (so that none expires within the two hours a run may
// take, for the default TTL of a day; a quarter of the TTL for a short one), then expired
// more keys that expired over the last three hours, and analyses the tables.
func seedCopyMain(l *loader, url string, live, expired int) error {
	if url == "" {
		return fmt.Errorf("no -database-url")
	}
	ctx := context.Background()
	db, err := sql.Open("postgres", url)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := newCopySeed(ctx, db, l)
	if err != nil {
		return err
	}
	now := time.Now()
	t0 := time.Now()
	span := max(s.ttl-2*time.Hour, s.ttl/4)
	if err := s.seed(ctx, db, 0, int64(live), now.Add(-span), now.Add(-time.Minute)); err != nil {
		return err
	}
	// Expired keys: created a TTL before they expire, expiring from 3 hours to 2 minutes ago.
	if err := s.seed(ctx, db, int64(live), int64(live+expired),
		now.Add(-3*time.Hour-s.ttl), now.Add(-2*time.Minute-s.ttl)); err != nil {
		return err
	}
	seeded := time.Since(t0)
	// Statistics and the visibility map, as autovacuum would take them, before anything is
	// measured (bench.sh does the same after seeding).
	if _, err := db.ExecContext(ctx, seedVacuumSQL); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	fmt.Fprintf(os.Stderr, "seed-copy: %d live and %d expired keys in %.1fs (%.0f keys/s), vacuumed in %.1fs\n",
		live, expired, seeded.Seconds(), float64(live+expired)/seeded.Seconds(), time.Since(t0).Seconds()-seeded.Seconds())
	return nil
}
