package settlement

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/schedule"
)

// ErrDayNotOver is a settlement asked for a day that has not ended in the client's zone:
// settling it would close it early and turn the rest of its movements into adjustments.
var ErrDayNotOver = errors.New("the day has not ended in the client's time zone")

// ErrNoSuchClient is a settlement asked for a client tekrar does not have.
var ErrNoSuchClient = errors.New("no such client")

// The defaults of Config's fields, for a field left zero.
const (
	// GraceDefault is Config.Grace's default.
	GraceDefault = 15 * time.Minute
	// LookBackDefault is Config.LookBack's default, in days.
	LookBackDefault = 35
	// LateWindowDefault is Config.LateWindow's default: 40 days.
	LateWindowDefault = 40 * 24 * time.Hour
)

// Config tunes a Settler; the zero value of a field takes its default.
type Config struct {
	// Observe, when not nil, is told what every SettleDue pass did, also a pass that
	// stopped on an error (metrics).
	Observe func(Result, error)
	// Grace is how long after a day ends SettleDue waits before it settles it, so that a
	// movement whose transaction began before midnight and commits just after it is
	// counted on its own day rather than as an adjustment. Default GraceDefault (15 minutes).
	Grace time.Duration
	// LookBack is how many days before the last ended one SettleDue settles when they
	// are not settled yet. Older days are settled by hand (tekrar settle). Default
	// LookBackDefault (35).
	LookBack int
	// LateWindow is how far before a day's start its settlement looks for movements of
	// settled days that came late. Disputes are looked for at any age: their time is the
	// provider's, and may be long before tekrar records them. Default LateWindowDefault
	// (40 days).
	LateWindow time.Duration
	// Now is the clock of Settle (SettleDue is given its instant). Default time.Now.
	Now func() time.Time
}

// withDefaults fills the fields left zero with their defaults.
func (c Config) withDefaults() Config {
	c.Grace = cmp.Or(c.Grace, GraceDefault)
	c.LookBack = cmp.Or(c.LookBack, LookBackDefault)
	c.LateWindow = cmp.Or(c.LateWindow, LateWindowDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// mustValidate panics on a setting no settlement can run with: a negative Grace would settle
// a day before it ends (Settle refuses it, so every pass would fail), a negative LookBack
// would settle no day, a negative LateWindow would find no late movement. These are
// programming errors, caught at start.
func (c Config) mustValidate() Config {
	switch {
	case c.Grace < 0:
		panic(fmt.Sprintf("settlement: Grace %s, want zero (the default) or more", c.Grace))
	case c.LookBack < 0:
		panic(fmt.Sprintf("settlement: LookBack %d, want zero (the default) or more", c.LookBack))
	case c.LateWindow < 0:
		panic(fmt.Sprintf("settlement: LateWindow %s, want zero (the default) or more", c.LateWindow))
	}
	return c
}

// Settler writes settlements: Settle one client's day, SettleDue every due day of every
// client. Serve runs SettleDue as the scheduled task "settle"; `tekrar settle` calls Settle.
type Settler struct {
	db     *sqlx.DB
	cfg    Config
	logger *slog.Logger
}

// New returns a Settler on db that logs its passes to logger (nothing when nil). It panics
// on a Config no settlement can run with (a negative Grace, LookBack or LateWindow).
func New(db *sqlx.DB, cfg Config, logger *slog.Logger) *Settler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Settler{db: db, cfg: cfg.withDefaults().mustValidate(), logger: logger}
}

// Settlement is one client's settlement of one day.
type Settlement struct {
	ID        int64
	ClientID  int64
	Day       calendar.Day
	TimeZone  string
	StartsAt  time.Time // the day's window, [StartsAt, EndsAt), in the zone it was settled in
	EndsAt    time.Time
	SettledAt time.Time
	Process   string
	Totals    []Total // by currency; none on a day with no movement
	Items     int     // movements of the day itself
	Adjusted  int     // movements of earlier, settled days it counted late
	// Created is true when this call wrote the settlement, false when it existed.
	Created bool
	// Waiting counts, on a rerun of a settled day, the movements of this day or earlier
	// settled days that no settlement has counted yet: the next settlement of the client
	// will count them as adjustments.
	Waiting int
}

// Settle settles one day of one client, or, when the day is settled already, returns its
// settlement as it was written and counts what came late since (Waiting). The day must have
// ended in the client's zone.
func (s *Settler) Settle(ctx context.Context, clientID int64, day calendar.Day) (Settlement, error) {
	var zone string
	err := s.db.GetContext(ctx, &zone, clientZoneSQL, clientID)
	if errors.Is(err, sql.ErrNoRows) {
		return Settlement{}, fmt.Errorf("settle client %d: %w", clientID, ErrNoSuchClient)
	}
	if err != nil {
		return Settlement{}, fmt.Errorf("settle client %d: read its time zone: %w", clientID, err)
	}
	return s.settle(ctx, clientID, zone, day, s.cfg.Now())
}

func (s *Settler) settle(ctx context.Context, clientID int64, zone string, day calendar.Day, now time.Time) (Settlement, error) {
	loc, err := clients.Location(zone)
	if err != nil {
		return Settlement{}, fmt.Errorf("settle %s of client %d: %w", day, clientID, err)
	}
	start, end := day.Window(loc)
	if now.Before(end) {
		return Settlement{}, fmt.Errorf("settle %s of client %d: %w (%s); it ends at %s",
			day, clientID, ErrDayNotOver, zone, end.Format(time.RFC3339))
	}
	var out Settlement
	err = db.InTx(ctx, s.db, fmt.Sprintf("settle %s of client %d", day, clientID), func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, settleLockSQL, settleLockClass, clientID); err != nil {
			return fmt.Errorf("lock the client's settlements: %w", err)
		}
		var row settlementRow
		err := tx.GetContext(ctx, &row, findSettlementSQL, clientID, day.String())
		switch {
		case err == nil:
			out, err = s.existing(ctx, tx, row, loc)
			return err
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("read the settlement: %w", err)
		}
		out, err = s.create(ctx, tx, settlementRow{ClientID: clientID, TimeZone: zone,
			StartsAt: start, EndsAt: end, SettledAt: now, Process: schedule.Process()}, day, loc)
		return err
	})
	if err != nil {
		return Settlement{}, err
	}
	return out, nil
}

// create writes the settlement of row's day with the movements it claims.
func (s *Settler) create(ctx context.Context, tx *sqlx.Tx, row settlementRow, day calendar.Day, loc *time.Location) (Settlement, error) {
	claim, err := s.claimable(ctx, tx, row.ClientID, day, loc, row.StartsAt, row.EndsAt)
	if err != nil {
		return Settlement{}, err
	}
	var written settlementRow
	if err := tx.GetContext(ctx, &written, insertSettlementSQL, row.ClientID, day.String(), row.TimeZone, row.StartsAt,
		row.EndsAt, row.SettledAt, row.Process); err != nil {
		// No row: written meanwhile, which the lock rules out; the transaction ends here.
		return Settlement{}, fmt.Errorf("write the settlement: %w", err)
	}
	claimed, err := claimItems(ctx, tx, written.ID, row.ClientID, claim)
	if err != nil {
		return Settlement{}, err
	}
	out := settlementOf(written)
	out.Created = true
	byCurrency := map[string]*Total{}
	var currencies []string
	for _, c := range claimed {
		if c.Adjusted {
			out.Adjusted++
			continue
		}
		out.Items++
		t := byCurrency[c.Currency]
		if t == nil {
			t = &Total{Currency: c.Currency}
			byCurrency[c.Currency] = t
			currencies = append(currencies, c.Currency)
		}
		switch c.Kind {
		case "capture", "installment": // an installment after the first is a capture of its own
			t.CapturedAmount += c.Amount
			t.CapturedCount++
		case "refund":
			t.RefundedAmount += c.Amount
			t.RefundedCount++
		case "dispute":
			t.DisputedAmount += c.Amount
			t.DisputedCount++
		case "compensation":
			t.CompensatedAmount += c.Amount
			t.CompensatedCount++
		}
	}
	for _, cur := range currencies {
		t := byCurrency[cur]
		if _, err := tx.ExecContext(ctx, insertTotalsSQL, written.ID, t.Currency, t.CapturedAmount, t.CapturedCount,
			t.RefundedAmount, t.RefundedCount, t.DisputedAmount, t.DisputedCount, t.CompensatedAmount,
			t.CompensatedCount); err != nil {
			return Settlement{}, fmt.Errorf("write the totals in %s: %w", cur, err)
		}
	}
	// Read back in the order every reader uses.
	if err := tx.SelectContext(ctx, &out.Totals, totalsSQL, written.ID); err != nil {
		return Settlement{}, fmt.Errorf("read the totals: %w", err)
	}
	return out, nil
}

// existing is a settlement as it was written, with what waits for the next one.
func (s *Settler) existing(ctx context.Context, tx *sqlx.Tx, row settlementRow, loc *time.Location) (Settlement, error) {
	out := settlementOf(row)
	if err := tx.SelectContext(ctx, &out.Totals, totalsSQL, row.ID); err != nil {
		return Settlement{}, fmt.Errorf("read the totals: %w", err)
	}
	var n struct {
		Own      int `db:"own"`
		Adjusted int `db:"adjusted"`
	}
	if err := tx.GetContext(ctx, &n, itemCountsSQL, row.ID); err != nil {
		return Settlement{}, fmt.Errorf("count the items: %w", err)
	}
	out.Items, out.Adjusted = n.Own, n.Adjusted
	// What a recomputation of the day would find beyond the row: the late movements of
	// this day and of earlier settled days, which the next settlement counts.
	waiting, err := s.late(ctx, tx, row.ClientID, out.Day.AddDays(1), loc, row.EndsAt)
	if err != nil {
		return Settlement{}, err
	}
	out.Waiting = len(waiting)
	return out, nil
}

// claim is a movement with the day it belongs to, ready to be claimed.
type claim struct {
	movement
	Day      calendar.Day
	Adjusted bool
}

// claimable lists the movements the settlement of day (window [start, end)) claims: the
// unclaimed ones of the day, and the unclaimed ones of earlier settled days.
func (s *Settler) claimable(ctx context.Context, tx *sqlx.Tx, clientID int64, day calendar.Day, loc *time.Location, start, end time.Time) ([]claim, error) {
	var own []movement
	if err := tx.SelectContext(ctx, &own, unclaimedMovementsSQL, clientID, start, end, start); err != nil {
		return nil, fmt.Errorf("list the day's movements: %w", err)
	}
	out := make([]claim, 0, len(own))
	for _, m := range own {
		out = append(out, claim{movement: m, Day: day})
	}
	late, err := s.late(ctx, tx, clientID, day, loc, start)
	if err != nil {
		return nil, err
	}
	return append(out, late...), nil
}

// late lists the unclaimed movements before until (within the late window, or of any age
// for a dispute, whose time is the provider's) whose day, in loc, is before day and settled
// already: the adjustments the settlement of day counts.
func (s *Settler) late(ctx context.Context, tx *sqlx.Tx, clientID int64, day calendar.Day, loc *time.Location, until time.Time) ([]claim, error) {
	from := until.Add(-s.cfg.LateWindow)
	var ms []movement
	if err := tx.SelectContext(ctx, &ms, unclaimedMovementsSQL, clientID, from, until, nil); err != nil {
		return nil, fmt.Errorf("list late movements: %w", err)
	}
	if len(ms) == 0 {
		return nil, nil
	}
	oldest := from
	for _, m := range ms {
		if m.OccurredAt.Before(oldest) {
			oldest = m.OccurredAt
		}
	}
	var days []time.Time
	if err := tx.SelectContext(ctx, &days, settledDaysSQL, clientID, calendar.Of(oldest, loc).String()); err != nil {
		return nil, fmt.Errorf("list the settled days: %w", err)
	}
	settled := make(map[calendar.Day]bool, len(days))
	for _, d := range days {
		settled[calendar.Of(d, time.UTC)] = true
	}
	var out []claim
	for _, m := range ms {
		if d := calendar.Of(m.OccurredAt, loc); d.Before(day) && settled[d] {
			out = append(out, claim{movement: m, Day: d, Adjusted: true})
		}
	}
	return out, nil
}

// claimItems claims cs for settlement id and returns the ones it claimed.
func claimItems(ctx context.Context, tx *sqlx.Tx, id, clientID int64, cs []claim) ([]claim, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	n := len(cs)
	kinds, days, currencies, times := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	sources, amounts, orders := make([]int64, n), make([]int64, n), make([]int64, n)
	adjusted := make([]bool, n)
	for i, c := range cs {
		kinds[i], sources[i], days[i], adjusted[i] = c.Kind, c.SourceID, c.Day.String(), c.Adjusted
		times[i], amounts[i], currencies[i] = c.OccurredAt.UTC().Format(time.RFC3339Nano), c.Amount, c.Currency
		if c.OrderID != nil {
			orders[i] = *c.OrderID
		}
	}
	var rows []struct {
		movement
		Day      time.Time `db:"day"`
		Adjusted bool      `db:"adjusted"`
	}
	if err := tx.SelectContext(ctx, &rows, claimItemsSQL, clientID, id, pq.Array(kinds), pq.Array(sources),
		pq.Array(days), pq.Array(adjusted), pq.Array(times), pq.Array(amounts), pq.Array(currencies),
		pq.Array(orders)); err != nil {
		return nil, fmt.Errorf("claim %d movements: %w", n, err)
	}
	out := make([]claim, len(rows))
	for i, r := range rows {
		out[i] = claim{movement: r.movement, Day: calendar.Of(r.Day, time.UTC), Adjusted: r.Adjusted}
	}
	return out, nil
}

func settlementOf(row settlementRow) Settlement {
	return Settlement{ID: row.ID, ClientID: row.ClientID, Day: calendar.Of(row.Day, time.UTC), TimeZone: row.TimeZone,
		StartsAt: row.StartsAt, EndsAt: row.EndsAt, SettledAt: row.SettledAt, Process: row.Process}
}

// Clients lists the ids of every client, the ones a settlement of all clients settles.
func (s *Settler) Clients(ctx context.Context) ([]int64, error) {
	var cs []dueClient
	if err := s.db.SelectContext(ctx, &cs, dueClientsSQL); err != nil {
		return nil, fmt.Errorf("list clients: %w", err)
	}
	ids := make([]int64, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids, nil
}
