package psp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The behaviour tests: each runs against the in-process sandbox and against the same
// sandbox behind NewHandler and Client.

func TestChargeOutcomeOfEachToken(t *testing.T) {
	// Long enough that a repeated key answered from the ledger is clearly faster, even on a
	// loaded machine under the race detector.
	const slow = time.Second
	cases := []struct {
		token                   string
		wantStatus, wantDecline string
		wantBrand, wantLast4    string
		minDuration             time.Duration
	}{
		{TokenVisa, StatusSucceeded, "", "visa", "4242", 0},
		{TokenMastercard, StatusSucceeded, "", "mastercard", "4444", 0},
		{TokenDeclined, StatusDeclined, DeclineCardDeclined, "visa", "0002", 0},
		{TokenSlow, StatusSucceeded, "", "visa", "4242", slow},
		{"tok_nobody_knows", StatusDeclined, DeclineInvalidCard, "", "", 0},
	}
	forEachProvider(t, SandboxOptions{SlowDelay: slow}, func(t *testing.T, p Provider, sb *Sandbox) {
		for i, tc := range cases {
			t.Run(tc.token, func(t *testing.T) {
				req := ChargeRequest{Key: "order-1/" + tc.token, Amount: int64(1000 + i), Currency: "EUR", CardToken: tc.token, Description: "two coffees"}
				start := time.Now()
				c := mustCharge(t, p, req)
				if d := time.Since(start); d < tc.minDuration {
					t.Errorf("answered after %s, want at least %s", d, tc.minDuration)
				}
				want := Charge{
					ID: c.ID, Key: req.Key, Amount: req.Amount, Currency: "EUR",
					Status: tc.wantStatus, DeclineCode: tc.wantDecline,
					CardBrand: tc.wantBrand, CardLast4: tc.wantLast4, Description: "two coffees", Created: c.Created,
				}
				if !sameCharge(c, want) || len(c.ID) < 10 || c.ID[:3] != "ch_" || c.Created.IsZero() {
					t.Fatalf("charge = %+v\nwant     %+v", c, want)
				}

				// Repeating the key returns the first charge, even for tok_slow at once.
				start = time.Now()
				again := mustCharge(t, p, req)
				if !sameCharge(again, c) {
					t.Errorf("repeated charge = %+v, want the first %+v", again, c)
				}
				if d := time.Since(start); d >= slow {
					t.Errorf("a repeated key took %s: it must be answered from the ledger at once", d)
				}
				looked, err := p.LookupCharge(testContext(t), req.Key)
				if err != nil || !sameCharge(looked, c) {
					t.Errorf("LookupCharge = %+v, %v; want %+v", looked, err, c)
				}
				rows := ledgerCharges(t, sb, req.Key)
				if len(rows) != 1 || !sameCharge(rows[0], c) {
					t.Errorf("ledger rows for the key = %+v, want exactly %+v", rows, c)
				}
			})
		}
		all, err := sb.Charges(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(cases) {
			t.Fatalf("ledger has %d charges, want %d", len(all), len(cases))
		}
		for i, c := range all {
			if c.Key != "order-1/"+cases[i].token {
				t.Errorf("ledger[%d] is %q, want the charges in the order they were made", i, c.Key)
			}
		}
	})
}

func TestChargeFailRecordsNothing(t *testing.T) {
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		req := ChargeRequest{Key: "fail-1", Amount: 500, Currency: "EUR", CardToken: TokenFail}
		c, err := p.Charge(testContext(t), req)
		if err == nil {
			t.Fatalf("tok_fail charged: %+v", c)
		}
		if !IsOutcomeUnknown(err) {
			t.Errorf("tok_fail error %v is definitive; a provider failure leaves the outcome unknown", err)
		}
		if rows := ledgerCharges(t, sb, req.Key); len(rows) != 0 {
			t.Errorf("tok_fail left %d ledger rows: %+v", len(rows), rows)
		}
		if _, err := p.LookupCharge(testContext(t), req.Key); !errors.Is(err, ErrNotFound) {
			t.Errorf("LookupCharge after tok_fail: %v, want ErrNotFound", err)
		}
		// It fails again on a retry: nothing was recorded to replay.
		if _, err := p.Charge(testContext(t), req); err == nil || !IsOutcomeUnknown(err) {
			t.Errorf("retried tok_fail: %v, want an unknown-outcome error again", err)
		}
	})
}

func TestChargeTimeoutChargesThenAnswersTooLate(t *testing.T) {
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		req := ChargeRequest{Key: "timeout-1", Amount: 700, Currency: "USD", CardToken: TokenTimeout}
		// start is read before the deadline is set: the deadline counts from inside
		// WithTimeout, so a clock read after it can find the answer, due at the deadline,
		// a little under 100 ms later (99.9 ms was seen).
		start := time.Now()
		ctx, cancel := context.WithTimeout(testContext(t), 100*time.Millisecond)
		defer cancel()
		c, err := p.Charge(ctx, req)
		elapsed := time.Since(start)
		if err == nil {
			t.Fatalf("tok_timeout answered: %+v", c)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !IsOutcomeUnknown(err) {
			t.Errorf("tok_timeout error = %v, want the context's deadline, an unknown outcome", err)
		}
		if elapsed < 100*time.Millisecond || elapsed > 5*time.Second {
			t.Errorf("tok_timeout returned after %s, want right after the 100ms deadline", elapsed)
		}

		// The charge happened. Over HTTP the provider may still be writing it when the
		// client gives up, as a real one would: wait for it a little.
		var looked Charge
		deadline := time.Now().Add(5 * time.Second)
		for {
			looked, err = p.LookupCharge(testContext(t), req.Key)
			if !errors.Is(err, ErrNotFound) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("LookupCharge after tok_timeout: %v, want the recorded charge", err)
		}
		if looked.Status != StatusSucceeded || looked.Amount != 700 || looked.Currency != "USD" || looked.CardLast4 != "4242" {
			t.Errorf("recorded charge = %+v, want a succeeded charge of 700 USD", looked)
		}
		rows := ledgerCharges(t, sb, req.Key)
		if len(rows) != 1 || !sameCharge(rows[0], looked) {
			t.Errorf("ledger rows = %+v, want exactly %+v", rows, looked)
		}

		// Repeating the key answers at once with that charge.
		start = time.Now()
		again := mustCharge(t, p, req)
		if !sameCharge(again, looked) {
			t.Errorf("repeated tok_timeout = %+v, want %+v", again, looked)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("repeated tok_timeout took %s, want an immediate answer from the ledger", d)
		}
	})
}

func TestChargeSlowRespectsContext(t *testing.T) {
	forEachProvider(t, SandboxOptions{SlowDelay: 10 * time.Second}, func(t *testing.T, p Provider, sb *Sandbox) {
		req := ChargeRequest{Key: "slow-1", Amount: 300, Currency: "EUR", CardToken: TokenSlow}
		ctx, cancel := context.WithTimeout(testContext(t), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := p.Charge(ctx, req)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("slow charge past its deadline: %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("slow charge returned after %s; it must stop at the context's deadline", d)
		}
		time.Sleep(50 * time.Millisecond) // let an HTTP handler notice its client left
		if rows := ledgerCharges(t, sb, req.Key); len(rows) != 0 {
			t.Errorf("an abandoned slow charge was recorded: %+v", rows)
		}
	})
}

func TestChargeSameKeyConcurrently(t *testing.T) {
	for _, token := range []string{TokenVisa, TokenDeclined} {
		t.Run(token, func(t *testing.T) {
			forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
				const n = 50
				req := ChargeRequest{Key: "same-key", Amount: 4200, Currency: "EUR", CardToken: token}
				results := make([]Charge, n)
				errs := make([]error, n)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						<-start
						results[i], errs[i] = p.Charge(testContext(t), req)
					})
				}
				close(start)
				wg.Wait()
				for i := range n {
					if errs[i] != nil {
						t.Fatalf("call %d: %v", i, errs[i])
					}
					if !sameCharge(results[i], results[0]) {
						t.Fatalf("call %d got %+v, call 0 got %+v: one key, two charges", i, results[i], results[0])
					}
				}
				rows := ledgerCharges(t, sb, req.Key)
				if len(rows) != 1 || rows[0].ID != results[0].ID {
					t.Fatalf("ledger has %d rows for the key (%+v), want exactly one, %s", len(rows), rows, results[0].ID)
				}
			})
		})
	}
}

func TestChargeKeyReused(t *testing.T) {
	first := ChargeRequest{Key: "reuse-1", Amount: 1000, Currency: "EUR", CardToken: TokenVisa, Description: "a"}
	cases := []struct {
		name    string
		change  func(r *ChargeRequest)
		wantErr error // nil: the first charge again
	}{
		{"another amount", func(r *ChargeRequest) { r.Amount = 1001 }, ErrKeyReused},
		{"another currency", func(r *ChargeRequest) { r.Currency = "USD" }, ErrKeyReused},
		{"another card", func(r *ChargeRequest) { r.CardToken = TokenMastercard }, ErrKeyReused},
		{"a failing card", func(r *ChargeRequest) { r.CardToken = TokenFail }, ErrKeyReused},
		{"another description", func(r *ChargeRequest) { r.Description = "b" }, nil},
	}
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		c := mustCharge(t, p, first)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				req := first
				tc.change(&req)
				got, err := p.Charge(testContext(t), req)
				if tc.wantErr != nil {
					if !errors.Is(err, tc.wantErr) || IsOutcomeUnknown(err) {
						t.Fatalf("Charge = %+v, %v; want %v", got, err, tc.wantErr)
					}
					return
				}
				if err != nil || !sameCharge(got, c) {
					t.Fatalf("Charge = %+v, %v; want the first charge %+v", got, err, c)
				}
			})
		}
		if rows := ledgerCharges(t, sb, first.Key); len(rows) != 1 {
			t.Errorf("ledger has %d rows for the key, want 1", len(rows))
		}
	})
}

func TestInvalidRequests(t *testing.T) {
	good := ChargeRequest{Key: "k", Amount: 1, Currency: "EUR", CardToken: TokenVisa}
	charges := []struct {
		name   string
		change func(r *ChargeRequest)
	}{
		{"empty key", func(r *ChargeRequest) { r.Key = "" }},
		{"key with a space", func(r *ChargeRequest) { r.Key = "a b" }},
		{"dot-dot key", func(r *ChargeRequest) { r.Key = ".." }},
		{"long key", func(r *ChargeRequest) { r.Key = string(make([]byte, 256)) }},
		{"zero amount", func(r *ChargeRequest) { r.Amount = 0 }},
		{"negative amount", func(r *ChargeRequest) { r.Amount = -5 }},
		{"lower-case currency", func(r *ChargeRequest) { r.Currency = "eur" }},
		{"no currency", func(r *ChargeRequest) { r.Currency = "" }},
		{"no token", func(r *ChargeRequest) { r.CardToken = "" }},
		{"NUL in the token", func(r *ChargeRequest) { r.CardToken = "tok_visa\x00" }},
		{"NUL in the description", func(r *ChargeRequest) { r.Description = "a\x00b" }},
		{"description not UTF-8", func(r *ChargeRequest) { r.Description = "caf\xe9" }},
	}
	refunds := []struct {
		name string
		req  RefundRequest
	}{
		{"empty key", RefundRequest{ChargeID: "ch_x", Amount: 1}},
		{"no charge", RefundRequest{Key: "r", Amount: 1}},
		{"zero amount", RefundRequest{Key: "r", ChargeID: "ch_x"}},
		{"NUL in the reason", RefundRequest{Key: "r", ChargeID: "ch_x", Amount: 1, Reason: "a\x00b"}},
		{"NUL in the charge id", RefundRequest{Key: "r", ChargeID: "ch_\x00", Amount: 1}},
	}
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		for _, tc := range charges {
			t.Run("charge/"+tc.name, func(t *testing.T) {
				req := good
				tc.change(&req)
				if _, err := p.Charge(testContext(t), req); !errors.Is(err, ErrInvalidRequest) {
					t.Errorf("Charge(%+v): %v, want ErrInvalidRequest", req, err)
				}
			})
		}
		for _, tc := range refunds {
			t.Run("refund/"+tc.name, func(t *testing.T) {
				if _, err := p.Refund(testContext(t), tc.req); !errors.Is(err, ErrInvalidRequest) {
					t.Errorf("Refund(%+v): %v, want ErrInvalidRequest", tc.req, err)
				}
			})
		}
		if all, err := sb.Charges(testContext(t)); err != nil || len(all) != 0 {
			t.Errorf("invalid requests left charges: %+v, %v", all, err)
		}
	})
}

func TestLookupUnknownKeys(t *testing.T) {
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		for _, key := range []string{"nothing", "with/slash", "100%", "q?x=1#frag"} {
			if c, err := p.LookupCharge(testContext(t), key); !errors.Is(err, ErrNotFound) {
				t.Errorf("LookupCharge(%q) = %+v, %v; want ErrNotFound", key, c, err)
			}
			if r, err := p.LookupRefund(testContext(t), key); !errors.Is(err, ErrNotFound) {
				t.Errorf("LookupRefund(%q) = %+v, %v; want ErrNotFound", key, r, err)
			}
			// And once charged, found under exactly that key.
			c := mustCharge(t, p, visaCharge(key, 10))
			if got, err := p.LookupCharge(testContext(t), key); err != nil || !sameCharge(got, c) {
				t.Errorf("LookupCharge(%q) = %+v, %v; want %+v", key, got, err, c)
			}
		}
	})
}

func TestRefundsNeverExceedTheCharge(t *testing.T) {
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		c := mustCharge(t, p, visaCharge("charge-100", 100))
		const n = 10
		errs := make([]error, n)
		refunds := make([]Refund, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				refunds[i], errs[i] = p.Refund(testContext(t), RefundRequest{
					Key: fmt.Sprintf("refund-%d", i), ChargeID: c.ID, Amount: 30, Reason: "requested_by_customer"})
			})
		}
		close(start)
		wg.Wait()
		succeeded := 0
		for i, err := range errs {
			switch {
			case err == nil:
				succeeded++
				if r := refunds[i]; r.Amount != 30 || r.ChargeID != c.ID || r.Currency != "EUR" || r.Status != RefundSucceeded || r.ID[:3] != "re_" {
					t.Errorf("refund %d = %+v", i, r)
				}
			case errors.Is(err, ErrRefundExceedsCharge):
			default:
				t.Errorf("refund %d: %v, want success or ErrRefundExceedsCharge", i, err)
			}
		}
		if succeeded != 3 {
			t.Errorf("%d refunds of 30 succeeded on a charge of 100, want exactly 3", succeeded)
		}
		rows := ledgerRefunds(t, sb, c.ID)
		var total int64
		for _, r := range rows {
			total += r.Amount
		}
		if len(rows) != 3 || total != 90 {
			t.Errorf("ledger has %d refunds totalling %d, want 3 totalling 90", len(rows), total)
		}
		var refunded int64
		if err := sb.db.GetContext(testContext(t), &refunded, `SELECT refunded_amount FROM psp_charges WHERE id = $1`, c.ID); err != nil || refunded != 90 {
			t.Errorf("refunded_amount = %d, %v; want 90", refunded, err)
		}

		// The remaining 10 can be refunded, and not one unit more.
		last, err := p.Refund(testContext(t), RefundRequest{Key: "refund-rest", ChargeID: c.ID, Amount: 10})
		if err != nil {
			t.Fatalf("refund of the remaining 10: %v", err)
		}
		if _, err := p.Refund(testContext(t), RefundRequest{Key: "refund-one-more", ChargeID: c.ID, Amount: 1}); !errors.Is(err, ErrRefundExceedsCharge) {
			t.Errorf("refund past the amount: %v, want ErrRefundExceedsCharge", err)
		}
		// A repeated key of a refund made earlier is still answered, even now the charge is
		// fully refunded.
		if again, err := p.Refund(testContext(t), RefundRequest{Key: "refund-rest", ChargeID: c.ID, Amount: 10}); err != nil || !sameRefund(again, last) {
			t.Errorf("repeated refund = %+v, %v; want %+v", again, err, last)
		}
	})
}

func TestRefundIdempotency(t *testing.T) {
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		c := mustCharge(t, p, visaCharge("charge-500", 500))
		other := mustCharge(t, p, visaCharge("charge-other", 500))
		req := RefundRequest{Key: "refund-a", ChargeID: c.ID, Amount: 200, Reason: "duplicate"}

		const n = 20
		results := make([]Refund, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				results[i], errs[i] = p.Refund(testContext(t), req)
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil || !sameRefund(results[i], results[0]) {
				t.Fatalf("refund %d = %+v, %v; want the same refund as call 0 (%+v)", i, results[i], errs[i], results[0])
			}
		}
		if rows := ledgerRefunds(t, sb, c.ID); len(rows) != 1 || !sameRefund(rows[0], results[0]) {
			t.Fatalf("ledger refunds = %+v, want exactly %+v", rows, results[0])
		}
		if got, err := p.LookupRefund(testContext(t), req.Key); err != nil || !sameRefund(got, results[0]) {
			t.Errorf("LookupRefund = %+v, %v; want %+v", got, err, results[0])
		}

		reused := []struct {
			name string
			req  RefundRequest
		}{
			{"another amount", RefundRequest{Key: req.Key, ChargeID: c.ID, Amount: 201}},
			{"another charge", RefundRequest{Key: req.Key, ChargeID: other.ID, Amount: 200}},
		}
		for _, tc := range reused {
			t.Run(tc.name, func(t *testing.T) {
				if r, err := p.Refund(testContext(t), tc.req); !errors.Is(err, ErrKeyReused) {
					t.Errorf("Refund = %+v, %v; want ErrKeyReused", r, err)
				}
			})
		}
		if rows := ledgerRefunds(t, sb, other.ID); len(rows) != 0 {
			t.Errorf("a reused key refunded the other charge: %+v", rows)
		}
	})
}

func TestRefundRefused(t *testing.T) {
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		declined := mustCharge(t, p, ChargeRequest{Key: "declined", Amount: 100, Currency: "EUR", CardToken: TokenDeclined})
		cases := []struct {
			name    string
			req     RefundRequest
			wantErr error
		}{
			{"declined charge", RefundRequest{Key: "r1", ChargeID: declined.ID, Amount: 10}, ErrNotRefundable},
			{"unknown charge", RefundRequest{Key: "r2", ChargeID: "ch_doesnotexist", Amount: 10}, ErrNotFound},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r, err := p.Refund(testContext(t), tc.req)
				if !errors.Is(err, tc.wantErr) || IsOutcomeUnknown(err) {
					t.Fatalf("Refund = %+v, %v; want %v", r, err, tc.wantErr)
				}
				if _, err := p.LookupRefund(testContext(t), tc.req.Key); !errors.Is(err, ErrNotFound) {
					t.Errorf("a refused refund was recorded: LookupRefund = %v", err)
				}
			})
		}
		if all, err := sb.Refunds(testContext(t)); err != nil || len(all) != 0 {
			t.Errorf("refunds ledger = %+v, %v; want empty", all, err)
		}
	})
}
