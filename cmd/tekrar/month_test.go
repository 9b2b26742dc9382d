package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/sdk"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/proctest"
)

// TestSimulatedMonth plays out weeks of a deployment, day by day, with real processes on a
// clock the test controls (TEKRAR_CLOCK_SHIFT): every day the installments that fell due are
// charged by `tekrar installments run`, the day before is settled by `tekrar settle`, and
// two `tekrar serve` replicas take the day's orders (paid at once or in installments on a
// saved card), double taps and refunds from three clients in Istanbul, New York and Berlin,
// sent through the Go SDK with its retry policy. Processes die at random: a replica
// SIGKILLed during the day's traffic or exiting at a crash point right after the provider
// charged, an installment run exiting right after the provider charged or SIGKILLed while a
// second runs, a settlement SIGKILLed half way or run twice at once, or run while the day's
// traffic still arrives (its late movements are adjustments); and at the end of every day
// both replicas are SIGKILLed. The day after the last is settled too, as the next night
// would, so that the last day's late movements are counted. Cards go bad and recover, so
// installments are declined, retried and handed to an operator. The period runs across 29
// February, New York's 23-hour 10 March and Berlin's 23-hour 31 March.
//
// At the end, tekrar and the provider's ledger must agree to the unit: every installment
// that fell due was charged once or is waiting for its retry or an operator, none early;
// every provider charge is an order's payment or an installment of tekrar's, once; every
// day of every client is settled once; and the settlements, with their adjustments, add up
// per client and currency to what the provider captured and refunded. The period, the
// traffic and the seed can be changed with TEKRAR_MONTH_FROM, TEKRAR_MONTH_TO,
// TEKRAR_MONTH_INTENTS (per client and day) and TEKRAR_MONTH_SEED.
func TestSimulatedMonth(t *testing.T) {
	t.Parallel()
	first, last := monthDay(t, "TEKRAR_MONTH_FROM", "2024-02-20"), monthDay(t, "TEKRAR_MONTH_TO", "2024-03-31")
	perDay := proctest.EnvSize(t, "TEKRAR_MONTH_INTENTS", 3)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TEKRAR_MONTH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TEKRAR_MONTH_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (TEKRAR_MONTH_SEED), %s to %s, %d intents per client and day", seed, first.Format(time.DateOnly), last.Format(time.DateOnly), perDay)
	m := newMonth(t, rand.New(rand.NewPCG(seed, seed)))
	m.perDay = perDay

	// The day after the last is settled too, as the next night would: a day settled while
	// its traffic still arrived has late movements, which only the client's next settlement
	// counts (as adjustments); when that day is the last, the next settlement is the day
	// after's.
	for day := first; !day.After(last.AddDate(0, 0, 2)); day = day.AddDate(0, 0, 1) {
		// The day's scheduled work runs at 11:00 UTC, when the day has begun in all three
		// zones and the day before has ended in all of them; its traffic follows.
		at := day.Add(11 * time.Hour)
		m.shift = at.Sub(time.Now())
		m.shifts[day.Format(time.DateOnly)] = m.shift
		if day.After(first) {
			m.settle(day.AddDate(0, 0, -1))
		}
		if day.After(last) {
			continue
		}
		m.cards(day)
		m.installments(at)
		m.traffic(day)
	}
	m.check(first, last)
}

// monthClient is one API client of the simulation and what the test knows of its orders.
type monthClient struct {
	id       int64
	prefix   string // the provider customer prefix, as the client's backend reads it
	zone     string
	currency string
	secret   string
	cards    []psp.PaymentMethod
	paid     []*monthOrder // orders that may be refunded
}

// monthOrder is a paid order: what of it may still be refunded.
type monthOrder struct {
	id           string
	refundable   int64
	installments bool
}

// monthIntent is one thing a client wants done, under one key.
type monthIntent struct {
	c      *monthClient
	key    string
	order  *sdk.OrderInput
	refund *monthOrder
	amount int64 // of the refund
	taps   int   // how many copies are sent at once (a double tap: 2)

	mu      sync.Mutex
	answers []monthAnswer
}

// monthAnswer is the final answer of one copy of an intent.
type monthAnswer struct {
	order   *sdk.Order
	refund  *sdk.Refund
	code    sdk.Code // of a problem
	problem string
}

// monthStats are the figures the test reports.
type monthStats struct {
	days, intents, doubleTaps, orders, installmentOrders, declined, refunds int
	replicaKills, replicaCrashPoints, dayEndKills                           int
	installmentRuns, installmentCrashPoints, installmentKills               int
	settleRuns, settleKills, settleTwiceAtOnce, earlySettles                int
}

type month struct {
	t       *testing.T
	rng     *rand.Rand
	dbURL   string
	db      *sqlx.DB
	sandbox *psp.Sandbox
	ports   []int
	http    *http.Client
	clients []*monthClient
	perDay  int                      // intents per client and day
	shift   time.Duration            // of the processes of the current day
	shifts  map[string]time.Duration // of the processes of each day (YYYY-MM-DD), for diagnostics
	n       int                      // keys made
	stats   monthStats
	lost    atomic.Int64 // answers lost and retried

	mu        sync.Mutex
	abandoned map[string]bool // keys answered payment_abandoned, made again under a new key
}

func newMonth(t *testing.T, rng *rand.Rand) *month {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	m := &month{t: t, rng: rng, abandoned: map[string]bool{}, shifts: map[string]time.Duration{}, dbURL: dbURL, db: openDB(t, dbURL), ports: freePorts(t, 2), http: newHTTPClient()}
	m.sandbox = psp.NewSandbox(m.db, psp.SandboxOptions{})
	for _, c := range []struct{ zone, currency string }{
		{"Europe/Istanbul", "TRY"}, {"America/New_York", "USD"}, {"Europe/Berlin", "EUR"},
	} {
		mc := &monthClient{zone: c.zone, currency: c.currency, secret: newClientSecret(t, dbURL, c.zone)}
		if err := m.db.QueryRow(`
			UPDATE clients SET time_zone = name, created_at = '2020-01-01' WHERE name = $1
			RETURNING id, provider_customer_prefix`, c.zone).Scan(&mc.id, &mc.prefix); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			pm, err := m.sandbox.SavePaymentMethod(context.Background(), mc.prefix+monthCustomer(i), psp.TokenVisa)
			if err != nil {
				t.Fatal(err)
			}
			mc.cards = append(mc.cards, pm)
		}
		m.clients = append(m.clients, mc)
	}
	return m
}

// monthCustomer is the customer id a client of the month gives the customer of its card i.
func monthCustomer(i int) string { return fmt.Sprintf("cus_%d", i) }

func monthDay(t *testing.T, env, def string) time.Time {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		v = def
	}
	d, err := time.Parse(time.DateOnly, v)
	if err != nil {
		t.Fatalf("%s=%q: want YYYY-MM-DD", env, v)
	}
	return d
}

// env is the environment of the current day's processes.
func (m *month) env(extra ...string) []string {
	return childEnv(append([]string{"DATABASE_URL=" + m.dbURL, "TEKRAR_LOG_LEVEL=warn", "TEKRAR_LEASE=1s",
		"TEKRAR_CLOCK_SHIFT=" + m.shift.String(), "TEKRAR_COMPLETER_INTERVAL=200ms", "TEKRAR_COMPLETER_GRACE=200ms"}, extra...)...)
}

// cards makes two saved cards go bad and recover: the first card of the Istanbul client
// declines from 20 March on (its installments retry on the 1st, 3rd and 7th day after they
// fell due, then go to an operator); the second of the Berlin client declines on 27 and 28
// March only (a retry pays them).
func (m *month) cards(day time.Time) {
	m.t.Helper()
	set := func(pm psp.PaymentMethod, bad bool) {
		token := psp.TokenVisa
		if bad {
			token = psp.TokenDeclined
		}
		if err := m.sandbox.ReplacePaymentMethodCard(context.Background(), pm.ID, token); err != nil {
			m.t.Fatal(err)
		}
	}
	d := day.Format(time.DateOnly)
	set(m.clients[0].cards[0], d >= "2024-03-20")
	set(m.clients[2].cards[1], d == "2024-03-27" || d == "2024-03-28")
}

// installments charges what is due at `at`, the way the day's chaos says, and then runs the
// job until nothing due is left uncharged.
func (m *month) installments(at time.Time) {
	m.t.Helper()
	atText := at.Format(time.RFC3339)
	args := []string{"installments", "run", "--at", atText}
	switch m.rng.IntN(4) {
	case 1, 2: // exit right after the provider answered, or after the claim
		point := []string{"installment_after_provider", "installment_after_claim"}[m.rng.IntN(2)]
		stdout, stderr, code := runTekrar(m.t, m.env("TEKRAR_CRASH_AT="+point), nil, args...)
		switch code {
		case 3:
			m.stats.installmentCrashPoints++
		case 0: // nothing was due
		default:
			m.t.Fatalf("installments run armed at %s exited %d\nstdout:\n%s\nstderr:\n%s", point, code, stdout, stderr)
		}
		m.stats.installmentRuns++
	case 3: // two at once, one SIGKILLed
		a, b := startTekrar(m.t, m.env(), nil, args...), startTekrar(m.t, m.env(), nil, args...)
		time.Sleep(time.Duration(m.rng.IntN(300)) * time.Millisecond)
		_ = a.cmd.Process.Signal(syscall.SIGKILL)
		if code := a.wait(m.t, time.Minute); code == -1 {
			m.stats.installmentKills++
		}
		if code := b.wait(m.t, time.Minute); code != 0 {
			m.t.Fatalf("installments run beside a killed one exited %d\nstderr:\n%s", code, b.stderr)
		}
		m.stats.installmentRuns += 2
	}
	for round := 0; ; round++ {
		// An installment left in flight by a dead run is taken again once its lease lapses.
		waitUntil(m.t, 30*time.Second, "installment leases to lapse", func() bool {
			return countRows(m.t, m.db, `SELECT count(*) FROM installments WHERE lease_expires_at > $1`, time.Now().Add(m.shift)) == 0
		})
		mustRun(m.t, m.env(), nil, args...)
		m.stats.installmentRuns++
		if countRows(m.t, m.db, `SELECT count(*) FROM installments WHERE status = 'scheduled' AND next_attempt_at <= $1`, at) == 0 {
			return
		}
		if round == 5 {
			var stuck []string
			if err := m.db.Select(&stuck, `
				SELECT format('order %s (%s) installment %s, %s attempts, in flight %s', o.id, o.status, i.n, i.attempts, i.in_flight)
				  FROM installments i JOIN orders o ON o.id = i.order_id
				 WHERE i.status = 'scheduled' AND i.next_attempt_at <= $1`, at); err != nil {
				m.t.Fatal(err)
			}
			m.t.Fatalf("installments due at %s still uncharged after %d runs: %s", atText, round+1, strings.Join(stuck, "; "))
		}
	}
}

// settle settles day for every client: sometimes twice at once, sometimes killed half way
// first; then once more, which must find it settled or settle it.
func (m *month) settle(day time.Time) {
	m.t.Helper()
	args := []string{"settle", "--date", day.Format(time.DateOnly)}
	env := childEnv("DATABASE_URL="+m.dbURL, "TEKRAR_LOG_LEVEL=warn")
	switch m.rng.IntN(3) {
	case 1:
		a, b := startTekrar(m.t, env, nil, args...), startTekrar(m.t, env, nil, args...)
		for _, p := range []*proc{a, b} {
			if code := p.wait(m.t, time.Minute); code != 0 {
				m.t.Fatalf("settle %v exited %d\nstderr:\n%s", args, code, p.stderr)
			}
		}
		m.stats.settleTwiceAtOnce++
		m.stats.settleRuns += 2
	case 2:
		p := startTekrar(m.t, env, nil, args...)
		time.Sleep(time.Duration(m.rng.IntN(150)) * time.Millisecond)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		if code := p.wait(m.t, time.Minute); code == -1 {
			m.stats.settleKills++
		}
		m.stats.settleRuns++
	}
	out := mustRun(m.t, env, nil, args...)
	m.stats.settleRuns++
	if n := strings.Count(out, "settlement "); n != len(m.clients) {
		m.t.Fatalf("settle %v printed %d settlements, want %d:\n%s", args, n, len(m.clients), out)
	}
}

// traffic runs one day of two replicas and the clients' intents, with the day's kill.
func (m *month) traffic(day time.Time) {
	m.t.Helper()
	m.stats.days++
	mode := m.rng.IntN(4)
	envs := [2][]string{m.env("TEKRAR_ADDR=" + addrOf(m.ports[0])), m.env("TEKRAR_ADDR=" + addrOf(m.ports[1]))}
	if mode == 2 {
		// Replica 0 exits at a crash point, after the provider charged and before tekrar
		// recorded it, on about a third of its charges.
		envs[0] = append(envs[0], "TEKRAR_CRASH_AT=after_provider", "TEKRAR_CRASH_RATE=0.3")
	}
	procs := [2]*proc{startTekrar(m.t, envs[0], nil, "serve"), startTekrar(m.t, envs[1], nil, "serve")}
	bases := [2]string{"http://" + addrOf(m.ports[0]), "http://" + addrOf(m.ports[1])}
	for i, p := range procs {
		waitReady(m.t, p, bases[i], 30*time.Second)
	}

	intents := m.intentsOf(day)
	var wg sync.WaitGroup
	for _, in := range intents {
		for tap := range in.taps {
			wg.Add(1)
			start := m.rng.IntN(2) + tap
			go func() { defer wg.Done(); m.send(in, bases, start) }()
		}
	}
	// On some days the day is settled while its traffic still arrives (the settle command
	// reads the wall clock, for which the day is long over): the movements recorded after
	// the settlement are dated inside a settled day and must come as adjustments on the
	// next day's settlement.
	var early *proc
	if m.rng.IntN(6) == 0 {
		time.Sleep(time.Duration(m.rng.IntN(200)) * time.Millisecond)
		early = startTekrar(m.t, childEnv("DATABASE_URL="+m.dbURL, "TEKRAR_LOG_LEVEL=warn"), nil,
			"settle", "--date", day.Format(time.DateOnly))
		m.stats.earlySettles++
	}
	if mode == 1 {
		victim, delay := m.rng.IntN(2), time.Duration(m.rng.IntN(400))*time.Millisecond
		time.Sleep(delay)
		_ = procs[victim].cmd.Process.Signal(syscall.SIGKILL)
		procs[victim].wait(m.t, 10*time.Second)
		m.stats.replicaKills++
	}
	wg.Wait()
	if early != nil {
		if code := early.wait(m.t, time.Minute); code != 0 {
			m.t.Fatalf("settle during the traffic exited %d\nstderr:\n%s", code, early.stderr)
		}
	}
	if mode == 2 && procs[0].exited() && procs[0].cmd.ProcessState.ExitCode() == 3 {
		m.stats.replicaCrashPoints++
	}
	for _, p := range procs {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			p.wait(m.t, 10*time.Second)
			m.stats.dayEndKills++
		}
	}
	for _, in := range intents {
		m.record(in)
	}
}

// intentsOf makes the day's intents: per client an order in installments on one of its
// saved cards, and orders paid at once, double taps and refunds of earlier orders.
func (m *month) intentsOf(day time.Time) []*monthIntent {
	var out []*monthIntent
	for _, c := range m.clients {
		refunded := map[*monthOrder]bool{}
		for i := range m.perDay {
			m.n++
			in := &monthIntent{c: c, key: fmt.Sprintf("%s-%d", day.Format("0102"), m.n), taps: 1}
			amount := int64(1000 + m.rng.IntN(49000))
			order := sdk.OrderInput{Currency: c.currency, Amount: amount,
				Items: []sdk.Item{{SKU: "SKU-" + strconv.Itoa(m.rng.IntN(20)), Name: "Item", Quantity: 1, UnitAmount: amount}}}
			switch r := m.rng.IntN(10); {
			case i == 0: // the day's installment plan, on a card chosen by the day
				n := day.YearDay() % len(c.cards)
				order.Installments = 2 + m.rng.IntN(5)
				order.Payment = sdk.Payment{Customer: monthCustomer(n), PaymentMethod: c.cards[n].ID}
				in.order = &order
			case r < 3 && len(c.paid) > 0: // a refund of an earlier order
				o := c.paid[m.rng.IntN(len(c.paid))]
				// A refund cancels a plan's unpaid installments: most refunds are of orders
				// paid at once, so that most plans live to be charged.
				if refunded[o] || o.refundable < 2 || (o.installments && m.rng.IntN(4) > 0) {
					m.n--
					continue
				}
				refunded[o] = true
				in.refund, in.amount = o, 1+m.rng.Int64N(o.refundable/2)
			default:
				token := []string{psp.TokenVisa, psp.TokenMastercard, psp.TokenVisa, psp.TokenDeclined}[m.rng.IntN(4)]
				order.Payment = sdk.Payment{CardToken: token}
				in.order = &order
				if r >= 8 {
					in.taps = 2
					m.stats.doubleTaps++
				}
			}
			out = append(out, in)
		}
	}
	m.stats.intents += len(out)
	return out
}

// send drives one copy of an intent to a final answer through the Go SDK, starting on
// replica start and moving to the other when an answer is lost (a replica died). An order
// whose first attempt died before the card was charged, and whose retry came after the
// completer canceled it (payment_abandoned, safe_new_key), is made again under a new key,
// as the app would.
func (m *month) send(in *monthIntent, bases [2]string, start int) {
	key := in.key
	policy := sdk.Policy{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second,
		AttemptTimeout: 10 * time.Second, Wait: 2 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for attempt := start; ; attempt++ {
		c := sdk.New(bases[attempt%2], in.c.secret, sdk.WithHTTPClient(m.http), sdk.WithPolicy(policy))
		var a monthAnswer
		var err error
		if in.order != nil {
			a.order, _, err = c.CreateOrder(context.Background(), key, *in.order)
		} else {
			a.refund, _, err = c.CreateRefund(context.Background(), key, in.refund.id, sdk.RefundInput{Amount: in.amount})
		}
		var lost *sdk.UnknownOutcome
		var problem *sdk.Error
		switch {
		case errors.As(err, &lost), errors.As(err, &problem) && problem.Retryable:
			if time.Now().After(deadline) {
				a.problem = fmt.Sprintf("no final answer: %v", err)
				break
			}
			m.lost.Add(1)
			continue
		case errors.As(err, &problem) && problem.Code == sdk.CodePaymentAbandoned && problem.SafeNewKey:
			m.mu.Lock()
			m.abandoned[key] = true
			m.mu.Unlock()
			key += "-again"
			continue
		case errors.As(err, &problem):
			a.code, a.problem = problem.Code, problem.Error()
			if problem.Code == sdk.CodePaymentDeclined {
				a.order = &sdk.Order{ID: problem.OrderID, Status: "declined"}
			}
		case err != nil:
			a.problem = err.Error()
		}
		in.mu.Lock()
		in.answers = append(in.answers, a)
		in.mu.Unlock()
		return
	}
}

// record checks an intent's answers and keeps what later intents need.
func (m *month) record(in *monthIntent) {
	t := m.t
	t.Helper()
	if len(in.answers) != in.taps {
		t.Fatalf("intent %s: %d answers, want %d", in.key, len(in.answers), in.taps)
	}
	a := in.answers[0]
	for _, b := range in.answers[1:] {
		if (a.order == nil) != (b.order == nil) || (a.order != nil && (a.order.ID != b.order.ID || a.order.Status != b.order.Status)) {
			t.Errorf("double tap %s: two answers disagree: %+v and %+v", in.key, a, b)
		}
	}
	switch {
	case a.problem != "" && a.code != sdk.CodePaymentDeclined:
		t.Errorf("intent %s: %s", in.key, a.problem)
	case in.refund != nil:
		if a.refund == nil || a.refund.Status != "succeeded" || a.refund.Amount != in.amount {
			t.Errorf("refund %s: %+v", in.key, a.refund)
			return
		}
		in.refund.refundable -= in.amount
		m.stats.refunds++
	case a.order.Status == "declined":
		m.stats.orders++
		m.stats.declined++
	case a.order.Status == "paid":
		m.stats.orders++
		refundable := a.order.Amount
		if len(a.order.Installments) > 0 {
			m.stats.installmentOrders++
			refundable = a.order.Installments[0].Amount
		}
		in.c.paid = append(in.c.paid, &monthOrder{id: a.order.ID, refundable: refundable, installments: len(a.order.Installments) > 0})
	default:
		t.Errorf("order %s: %+v", in.key, a.order)
	}
}

// check reconciles tekrar with the provider's ledger after the last day.
func (m *month) check(first, last time.Time) {
	t := m.t
	t.Helper()
	lastRun := last.Add(11 * time.Hour)
	count := func(q string, args ...any) int { t.Helper(); return countRows(t, m.db, q, args...) }
	checks := []struct {
		what, query string
		args        []any
	}{
		{"an order for every intent that got one, none more",
			`SELECT abs((SELECT count(*) FROM orders WHERE status <> 'canceled') - $1)`, []any{m.stats.orders}},
		{"a canceled order for every key answered payment_abandoned, none more",
			`SELECT abs((SELECT count(*) FROM orders WHERE status = 'canceled') - $1)`, []any{len(m.abandoned)}},
		{"installments due and not charged, nor waiting for a retry or an operator",
			`SELECT count(*) FROM installments WHERE status = 'scheduled' AND next_attempt_at <= $1`, []any{lastRun}},
		{"installments charged before they were due",
			`SELECT count(*) FROM installments WHERE status = 'paid' AND n > 1 AND paid_at < due_at`, nil},
		{"installments charged that were not due by the last run",
			`SELECT count(*) FROM installments WHERE status = 'paid' AND due_at > $1`, []any{lastRun}},
		{"installments or orders charged twice at the provider",
			`SELECT count(*) FROM (SELECT description FROM psp_charges WHERE status = 'succeeded'
			   GROUP BY description HAVING count(*) > 1) d`, nil},
		{"paid installments whose provider charge is not theirs",
			`SELECT count(*) FROM installments i LEFT JOIN psp_charges c ON c.id = i.provider_charge_id
			  WHERE i.status = 'paid' AND (c.id IS NULL OR c.status <> 'succeeded' OR c.amount <> i.amount
			        OR (i.n > 1 AND c.key <> i.provider_key))`, nil},
		{"provider charges tekrar does not hold as a payment or an installment",
			`SELECT count(*) FROM psp_charges c WHERE c.status = 'succeeded'
			   AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.provider_charge_id = c.id AND p.status = 'succeeded')
			   AND NOT EXISTS (SELECT 1 FROM installments i WHERE i.provider_charge_id = c.id AND i.status = 'paid')`, nil},
		{"provider refunds tekrar does not hold",
			`SELECT count(*) FROM psp_refunds pr WHERE NOT EXISTS (SELECT 1 FROM refunds r WHERE r.provider_key = pr.key AND r.status = 'succeeded')`, nil},
		{"orders whose captured amount is not what the provider charged for them",
			`SELECT count(*) FROM orders o WHERE o.captured_amount <> COALESCE((
			   SELECT sum(c.amount) FROM psp_charges c WHERE c.status = 'succeeded'
			      AND (c.id IN (SELECT provider_charge_id FROM payments WHERE order_id = o.id)
			        OR c.id IN (SELECT provider_charge_id FROM installments WHERE order_id = o.id))), 0)`, nil},
		{"days of a client not settled exactly once",
			`SELECT count(*) FROM clients c, generate_series($1::date, $2::date, interval '1 day') d
			  WHERE (SELECT count(*) FROM settlements s WHERE s.client_id = c.id AND s.day = d::date) <> 1`, []any{first, last.AddDate(0, 0, 1)}},
		{unsettledCheck,
			`SELECT (SELECT count(*) FROM payments p WHERE status = 'succeeded'
			          AND NOT EXISTS (SELECT 1 FROM settlement_items i WHERE i.kind = 'capture' AND i.source_id = p.order_id))
			      + (SELECT count(*) FROM installments x WHERE status = 'paid' AND n > 1
			          AND NOT EXISTS (SELECT 1 FROM settlement_items i WHERE i.kind = 'installment' AND i.source_id = x.id))
			      + (SELECT count(*) FROM refunds r WHERE status = 'succeeded'
			          AND NOT EXISTS (SELECT 1 FROM settlement_items i WHERE i.kind = 'refund' AND i.source_id = r.id))`, nil},
		{"settlements whose totals are not their own day's items",
			`SELECT count(*) FROM settlements s WHERE
			   (SELECT COALESCE(sum(captured_amount) + sum(refunded_amount), 0) FROM settlement_totals WHERE settlement_id = s.id)
			   <> (SELECT COALESCE(sum(amount), 0) FROM settlement_items WHERE settlement_id = s.id AND NOT adjusted)`, nil},
		{"installments charged without exactly one installment.paid event naming their charge",
			`SELECT count(*) FROM installments i WHERE i.status = 'paid' AND i.n > 1
			   AND (SELECT count(*) FROM outbox_events e WHERE e.type = 'installment.paid' AND e.order_id = i.order_id
			          AND e.payload->'installment'->>'n' = i.n::text
			          AND e.payload->'installment'->>'charge' = i.provider_charge_id) <> 1`, nil},
		{"installment events of installments that are not so",
			`SELECT count(*) FROM outbox_events e JOIN installments i
			    ON i.order_id = e.order_id AND i.n::text = e.payload->'installment'->>'n'
			 WHERE (e.type = 'installment.paid' AND i.status <> 'paid')
			    OR (e.type = 'installment.needs_attention' AND i.status NOT IN ('attention', 'canceled'))`, nil},
		{"compensations (nothing was given up on)", `SELECT count(*) FROM compensations`, nil},
	}
	for _, c := range checks {
		if n := count(c.query, c.args...); n != 0 {
			t.Errorf("%s: %d", c.what, n)
			if c.what == unsettledCheck {
				m.logUnsettled()
			}
		}
	}

	// The settlements, adjustments included, against the provider's ledger, per client and
	// currency.
	type line struct {
		Client   int64  `db:"client_id"`
		Currency string `db:"currency"`
		Captured int64  `db:"captured"`
		Refunded int64  `db:"refunded"`
	}
	read := func(q string) map[string]line {
		var ls []line
		if err := m.db.Select(&ls, q); err != nil {
			t.Fatal(err)
		}
		out := map[string]line{}
		for _, l := range ls {
			out[fmt.Sprintf("%d %s", l.Client, l.Currency)] = l
		}
		return out
	}
	settled := read(`
		SELECT client_id, currency,
		       COALESCE(sum(amount) FILTER (WHERE kind IN ('capture', 'installment')), 0) AS captured,
		       COALESCE(sum(amount) FILTER (WHERE kind = 'refund'), 0) AS refunded
		  FROM settlement_items GROUP BY client_id, currency`)
	provider := read(`
		SELECT o.client_id, c.currency, sum(c.amount) AS captured,
		       COALESCE((SELECT sum(pr.amount) FROM psp_refunds pr JOIN refunds r ON r.provider_key = pr.key
		                  WHERE r.client_id = o.client_id AND r.currency = c.currency), 0) AS refunded
		  FROM psp_charges c JOIN orders o ON o.id = COALESCE(
		         (SELECT order_id FROM payments WHERE provider_charge_id = c.id),
		         (SELECT order_id FROM installments WHERE provider_charge_id = c.id AND n > 1))
		 WHERE c.status = 'succeeded'
		 GROUP BY o.client_id, c.currency`)
	if len(settled) != len(m.clients) || fmt.Sprint(settled) != fmt.Sprint(provider) {
		t.Errorf("settled %v\nthe provider's ledger %v", settled, provider)
	}
	for _, c := range m.clients {
		k := fmt.Sprintf("%d %s", c.id, c.currency)
		t.Logf("client %s: captured %d, refunded %d; the provider: %d, %d", k, settled[k].Captured, settled[k].Refunded,
			provider[k].Captured, provider[k].Refunded)
	}

	// tekrar's own reconciliation of the period finds nothing to mend.
	out := mustRun(t, childEnv("DATABASE_URL="+m.dbURL, "TEKRAR_LOG_LEVEL=warn"), nil, "reconcile",
		"--since", first.Add(-24*time.Hour).Format(time.RFC3339), "--until", last.Add(48*time.Hour).Format(time.RFC3339))
	if !strings.Contains(out, "0 orphans found, 0 compensations created, 0 refunds made, 0 amount mismatches, 0 paid without charge, 0 still completing") {
		t.Errorf("reconciliation of the period: %s", out)
	}

	s := m.stats
	var inst struct {
		Paid      int `db:"paid"`
		Retried   int `db:"retried"`
		Attention int `db:"attention"`
		Waiting   int `db:"waiting"`
		Canceled  int `db:"canceled"`
	}
	if err := m.db.Get(&inst, `
		SELECT count(*) FILTER (WHERE status = 'paid' AND n > 1) AS paid,
		       count(*) FILTER (WHERE status = 'paid' AND n > 1 AND attempts > 1) AS retried,
		       count(*) FILTER (WHERE status = 'attention') AS attention,
		       count(*) FILTER (WHERE status = 'scheduled' AND attempts > 0) AS waiting,
		       count(*) FILTER (WHERE status = 'canceled') AS canceled
		  FROM installments`); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d days, %d intents (%d double taps): %d orders (%d in installments, %d declined), %d refunds; %d answers lost and retried; %d orders abandoned before their charge and made again",
		s.days, s.intents, s.doubleTaps, s.orders, s.installmentOrders, s.declined, s.refunds, m.lost.Load(), len(m.abandoned))
	t.Logf("installments charged by the job: %d (%d after a declined attempt); %d with an operator, %d waiting for a retry, %d canceled by refunds",
		inst.Paid, inst.Retried, inst.Attention, inst.Waiting, inst.Canceled)
	t.Logf("settlements: %d, with %d movements and %d adjustments (%d days settled while their traffic still arrived; %d adjustments on the day after the last)",
		count(`SELECT count(*) FROM settlements WHERE day BETWEEN $1 AND $2`, first, last),
		count(`SELECT count(*) FROM settlement_items WHERE NOT adjusted`), count(`SELECT count(*) FROM settlement_items WHERE adjusted`), s.earlySettles,
		count(`SELECT count(*) FROM settlement_items i JOIN settlements x ON x.id = i.settlement_id WHERE x.day = $1 AND i.adjusted`,
			last.AddDate(0, 0, 1)))
	t.Logf("kills: %d replicas SIGKILLed during traffic, %d at a crash point after the provider charged, %d at the end of a day; "+
		"%d installment runs (%d exited at a crash point, %d SIGKILLed); %d settle runs (%d SIGKILLed, %d days settled twice at once)",
		s.replicaKills, s.replicaCrashPoints, s.dayEndKills, s.installmentRuns, s.installmentCrashPoints, s.installmentKills,
		s.settleRuns, s.settleKills, s.settleTwiceAtOnce)
}

// unsettledCheck is the check of the money movements no settlement counted.
const unsettledCheck = "money movements no settlement counted"

// logUnsettled names every money movement no settlement counted, with the instant
// settlement dates it at, the client's zone, the business day that instant falls on and
// that day's settlement, so that a failure of unsettledCheck says which movements were
// missed and why they may have been. The processes of a day run on a shifted clock: the
// instant a movement was recorded at by the wall clock (the clock of the settle command)
// is its date less the shift of its day's processes.
func (m *month) logUnsettled() {
	t := m.t
	t.Helper()
	var rows []struct {
		Kind       string       `db:"kind"`
		ID         int64        `db:"id"`
		OrderID    int64        `db:"order_id"`
		ClientID   int64        `db:"client_id"`
		Zone       string       `db:"time_zone"`
		At         time.Time    `db:"at"`
		Day        string       `db:"day"`
		Settlement string       `db:"settlement"`
		SettledAt  sql.NullTime `db:"settled_at"`
		What       string       `db:"what"`
	}
	if err := m.db.Select(&rows, `
		WITH u AS (
		    SELECT 'capture' AS kind, p.order_id AS id, p.order_id, p.created_at AS at,
		           format('payment created %s, charge %s', p.created_at, p.provider_charge_id) AS what
		      FROM payments p WHERE p.status = 'succeeded'
		       AND NOT EXISTS (SELECT 1 FROM settlement_items i WHERE i.kind = 'capture' AND i.source_id = p.order_id)
		    UNION ALL
		    SELECT 'installment', x.id, x.order_id, x.paid_at,
		           format('installment %s of the order, due %s, paid %s, updated %s, %s attempts, charge %s',
		                  x.n, x.due_at, x.paid_at, x.updated_at, x.attempts, x.provider_charge_id)
		      FROM installments x WHERE x.status = 'paid' AND x.n > 1
		       AND NOT EXISTS (SELECT 1 FROM settlement_items i WHERE i.kind = 'installment' AND i.source_id = x.id)
		    UNION ALL
		    SELECT 'refund', r.id, r.order_id, r.updated_at,
		           format('refund %s created %s, updated %s, provider key %s, reason %s',
		                  r.public_id, r.created_at, r.updated_at, r.provider_key, r.reason)
		      FROM refunds r WHERE r.status = 'succeeded'
		       AND NOT EXISTS (SELECT 1 FROM settlement_items i WHERE i.kind = 'refund' AND i.source_id = r.id)
		)
		SELECT u.kind, u.id, u.order_id, c.id AS client_id, c.time_zone, u.at,
		       CAST(CAST(u.at AT TIME ZONE c.time_zone AS date) AS text) AS day, u.what,
		       COALESCE(format('settlement %s (window %s to %s, %s own movements, %s adjustments)', s.id,
		                       s.starts_at, s.ends_at,
		                       (SELECT count(*) FROM settlement_items i WHERE i.settlement_id = s.id AND NOT i.adjusted),
		                       (SELECT count(*) FROM settlement_items i WHERE i.settlement_id = s.id AND i.adjusted)),
		                '') AS settlement,
		       s.settled_at
		  FROM u JOIN orders o ON o.id = u.order_id JOIN clients c ON c.id = o.client_id
		  LEFT JOIN settlements s ON s.client_id = c.id AND s.day = CAST(u.at AT TIME ZONE c.time_zone AS date)
		 ORDER BY u.at`); err != nil {
		t.Fatal(err)
	}
	var newest string
	if err := m.db.Get(&newest, `SELECT COALESCE(CAST(max(day) AS text), 'none') FROM settlements`); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		settled := "its day is not settled"
		if r.SettledAt.Valid {
			settled = fmt.Sprintf("its day settled at %s by %s", r.SettledAt.Time.UTC().Format(time.RFC3339Nano), r.Settlement)
			if shift, ok := m.shifts[r.At.UTC().Format(time.DateOnly)]; ok {
				wall := r.At.Add(-shift)
				settled += fmt.Sprintf("; recorded at about %s by the wall clock, %s after that settlement",
					wall.UTC().Format(time.RFC3339Nano), wall.Sub(r.SettledAt.Time).Round(time.Millisecond))
			}
		}
		t.Logf("not settled: %s %d (order %d, client %d, %s): dated %s, day %s there; %s; %s; the newest settled day is %s",
			r.Kind, r.ID, r.OrderID, r.ClientID, r.Zone, r.At.UTC().Format(time.RFC3339Nano), r.Day, settled, r.What, newest)
	}
}
