package psp

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/stdwebhook"
)

// TestKeyLessSandboxChargesEveryRequest sends one charge twice under one key to the sandbox
// in each mode: with keys the second call is answered by the first charge, key-less (as
// iyzico documents its services) it is a second charge. Key-less, the charge is found by
// its reference and not by its key, and the key cannot be canceled.
func TestKeyLessSandboxChargesEveryRequest(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        SandboxOptions
		wantCharges int
	}{
		{"keys replayed", SandboxOptions{}, 1},
		{"key-less", SandboxOptions{KeyLess: true}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachProvider(t, tc.opts, func(t *testing.T, p Provider, sb *Sandbox) {
				ctx := testContext(t)
				req := visaCharge("order-1", 700)
				req.Description = "order ord_1"
				first := mustCharge(t, p, req)
				second := mustCharge(t, p, req)
				if got := ledgerCharges(t, sb, req.Key); len(got) != tc.wantCharges {
					t.Fatalf("the ledger holds %d charges under the key, want %d: %+v", len(got), tc.wantCharges, got)
				}
				// A charge of another order, under another key, is never found by this one's
				// reference.
				other := visaCharge("order-2", 300)
				other.Description = "order ord_2"
				mustCharge(t, p, other)

				found, lookupErr := p.LookupCharge(ctx, req.Key)
				// Over HTTP the look-up goes through the client as well.
				byRef, refErr := p.(ReferenceFinder).ChargesByReference(ctx, req.Description)
				_, cancelErr := p.CancelCharge(ctx, req.Key)
				if !tc.opts.KeyLess {
					if !sameCharge(first, second) {
						t.Errorf("the repeat answered %+v, want the first charge %+v", second, first)
					}
					if lookupErr != nil || !sameCharge(found, first) {
						t.Errorf("LookupCharge = %+v, %v; want the charge", found, lookupErr)
					}
					if !errors.Is(refErr, ErrLookupUnsupported) {
						t.Errorf("ChargesByReference with keys: %v, want ErrLookupUnsupported", refErr)
					}
					if cancelErr != nil {
						t.Errorf("CancelCharge with keys: %v", cancelErr)
					}
					return
				}
				if first.ID == second.ID || second.Status != StatusSucceeded || second.Key != req.Key {
					t.Errorf("key-less repeat = %+v, want a new succeeded charge carrying the key (first %s)", second, first.ID)
				}
				if !errors.Is(lookupErr, ErrLookupUnsupported) || IsOutcomeUnknown(lookupErr) {
					t.Errorf("LookupCharge key-less: %v, want ErrLookupUnsupported (definitive)", lookupErr)
				}
				if refErr != nil || len(byRef) != 2 || !sameCharge(byRef[0], first) || !sameCharge(byRef[1], second) {
					t.Errorf("ChargesByReference = %+v, %v; want both charges, oldest first", byRef, refErr)
				}
				if !errors.Is(cancelErr, ErrCancelUnsupported) {
					t.Errorf("CancelCharge key-less: %v, want ErrCancelUnsupported", cancelErr)
				}
				if none, err := p.(ReferenceFinder).ChargesByReference(ctx, "order ord_3"); err != nil || len(none) != 0 {
					t.Errorf("ChargesByReference of an order never charged = %+v, %v; want none", none, err)
				}
			})
		})
	}
}

// TestKeyLessWebhooksComeLateAtMostThreeTimes: a key-less sandbox sends an event no sooner
// than KeyLessWebhookFirstAfter after its change, retries it every KeyLessWebhookRetryEvery,
// and gives it up after the third failed delivery; a later event is still delivered.
func TestKeyLessWebhooksComeLateAtMostThreeTimes(t *testing.T) {
	secret := stdwebhook.NewSecret()
	r, url := newReceiver(t, secret, KeyLessWebhookMaxAttempts)
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var elapsed atomic.Int64
	at := func(d time.Duration) { elapsed.Store(int64(d)) }
	sb := newSandbox(t, SandboxOptions{KeyLess: true, Now: func() time.Time { return start.Add(time.Duration(elapsed.Load())) },
		Webhooks: &WebhookOptions{URL: url, Secret: secret}})
	ctx := testContext(t)
	mustCharge(t, sb, visaCharge("order-1", 500))

	for _, step := range []struct {
		at    time.Duration
		posts int // the receiver's POSTs so far
	}{
		{0, 0},
		{KeyLessWebhookFirstAfter - time.Second, 0},
		{KeyLessWebhookFirstAfter, 1},
		{KeyLessWebhookFirstAfter + KeyLessWebhookRetryEvery - time.Second, 1},
		{KeyLessWebhookFirstAfter + KeyLessWebhookRetryEvery, 2},
		{KeyLessWebhookFirstAfter + 2*KeyLessWebhookRetryEvery, 3},
		{KeyLessWebhookFirstAfter + 10*KeyLessWebhookRetryEvery, 3}, // given up
	} {
		at(step.at)
		if _, err := sb.DeliverWebhooks(ctx); err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		posts := r.posts
		r.mu.Unlock()
		if posts != step.posts {
			t.Fatalf("at +%s the receiver had %d deliveries, want %d", step.at, posts, step.posts)
		}
	}
	if st := sb.WebhookStats(); st.Failed != 3 || st.GaveUp != 1 || st.Delivered != 0 {
		t.Errorf("stats %+v, want 3 failed, 1 given up", st)
	}

	// The receiver is up now: the next charge's event arrives once, late.
	now := KeyLessWebhookFirstAfter + 10*KeyLessWebhookRetryEvery
	c := mustCharge(t, sb, visaCharge("order-2", 700))
	at(now + KeyLessWebhookFirstAfter)
	if _, err := sb.DeliverWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.events(); len(got) != 1 || got[0].Data.ChargeID != c.ID {
		t.Errorf("events received %+v, want the second charge's", got)
	}
}
