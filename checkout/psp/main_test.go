package psp

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// implementation is one way to reach the sandbox: in process, or over HTTP through
// NewHandler and Client. The behaviour tests run against each, so the two cannot drift.
type implementation struct {
	name string
	new  func(t *testing.T, opts SandboxOptions) (Provider, *Sandbox)
}

var implementations = []implementation{
	{"sandbox", func(t *testing.T, opts SandboxOptions) (Provider, *Sandbox) {
		t.Helper()
		sb := newSandbox(t, opts)
		return sb, sb
	}},
	{"http", func(t *testing.T, opts SandboxOptions) (Provider, *Sandbox) {
		t.Helper()
		sb := newSandbox(t, opts)
		return newHTTPProvider(t, sb), sb
	}},
}

// forEachProvider runs f once per implementation, each on a fresh database.
func forEachProvider(t *testing.T, opts SandboxOptions, f func(t *testing.T, p Provider, sb *Sandbox)) {
	t.Helper()
	for _, impl := range implementations {
		t.Run(impl.name, func(t *testing.T) {
			p, sb := impl.new(t, opts)
			f(t, p, sb)
		})
	}
}

// newSandbox returns a sandbox on a fresh migrated database, with a clock that ticks one
// second per reading so that the ledger's order is the order of the calls.
func newSandbox(t *testing.T, opts SandboxOptions) *Sandbox {
	t.Helper()
	if opts.Now == nil {
		opts.Now = tickingClock()
	}
	return NewSandbox(dbtest.New(t), opts)
}

func tickingClock() func() time.Time {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var n atomic.Int64
	return func() time.Time { return start.Add(time.Duration(n.Add(1)) * time.Second) }
}

// newHTTPProvider serves p on a test server and returns a client of it.
func newHTTPProvider(t *testing.T, p Provider) *Client {
	t.Helper()
	srv := httptest.NewServer(NewHandler(p, discardLogger()))
	t.Cleanup(srv.Close)
	return NewClient(srv.URL+"/", srv.Client())
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustCharge charges and fails the test on any error.
func mustCharge(t *testing.T, p Provider, req ChargeRequest) Charge {
	t.Helper()
	c, err := p.Charge(testContext(t), req)
	if err != nil {
		t.Fatalf("Charge(%+v): %v", req, err)
	}
	return c
}

func visaCharge(key string, amount int64) ChargeRequest {
	return ChargeRequest{Key: key, Amount: amount, Currency: "EUR", CardToken: TokenVisa, Description: "test order"}
}

// sameCharge compares two charges, their times as instants.
// sameCharge compares two answers of one charge. The card's fingerprint is compared only
// when both carry it: a charge's answer does, the sandbox's look-up by key does not (it
// keeps no token).
func sameCharge(a, b Charge) bool {
	ta, tb := a.Created, b.Created
	a.Created, b.Created = time.Time{}, time.Time{}
	if a.CardFingerprint == "" || b.CardFingerprint == "" {
		a.CardFingerprint, b.CardFingerprint = "", ""
	}
	return a == b && ta.Equal(tb)
}

func sameRefund(a, b Refund) bool {
	ta, tb := a.Created, b.Created
	a.Created, b.Created = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb)
}

// ledgerCharges returns the ledger's charges with key.
func ledgerCharges(t *testing.T, sb *Sandbox, key string) []Charge {
	t.Helper()
	all, err := sb.Charges(testContext(t))
	if err != nil {
		t.Fatalf("Charges: %v", err)
	}
	var out []Charge
	for _, c := range all {
		if c.Key == key {
			out = append(out, c)
		}
	}
	return out
}

// ledgerRefunds returns the ledger's refunds of chargeID.
func ledgerRefunds(t *testing.T, sb *Sandbox, chargeID string) []Refund {
	t.Helper()
	all, err := sb.Refunds(testContext(t))
	if err != nil {
		t.Fatalf("Refunds: %v", err)
	}
	var out []Refund
	for _, r := range all {
		if r.ChargeID == chargeID {
			out = append(out, r)
		}
	}
	return out
}

// definitiveErrors are the sentinels; anything else is an unknown outcome.
var definitiveErrors = []error{ErrNotFound, ErrKeyReused, ErrRefundExceedsCharge, ErrNotRefundable, ErrInvalidRequest}
