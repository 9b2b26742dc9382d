package psp

import (
	"context"
	"errors"
	"testing"
)

// TestDashboardClientMatchesSandbox: the dashboard in process and through Client gives the same answers, and the same
// definitive errors, so that `tekrar psp refund|dispute|close-dispute` reports what the
// sandbox decided.
func TestDashboardClientMatchesSandbox(t *testing.T) {
	t.Parallel()
	impls := []struct {
		name string
		new  func(t *testing.T) (Dashboard, *Sandbox)
	}{
		{"sandbox", func(t *testing.T) (Dashboard, *Sandbox) { sb := newSandbox(t, SandboxOptions{}); return sb, sb }},
		{"http", func(t *testing.T) (Dashboard, *Sandbox) {
			sb := newSandbox(t, SandboxOptions{})
			return newHTTPProvider(t, sb), sb
		}},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			d, sb := impl.new(t)
			ctx := testContext(t)
			ch, err := sb.Charge(ctx, visaCharge("k1", 1000))
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				name    string
				do      func(context.Context) (any, error)
				wantErr error
				check   func(t *testing.T, v any)
			}{
				{"refund of an unknown charge", func(ctx context.Context) (any, error) { return d.DashboardRefund(ctx, "ch_nope", 1, "") }, ErrNotFound, nil},
				{"refund beyond the charge", func(ctx context.Context) (any, error) { return d.DashboardRefund(ctx, ch.ID, 1001, "") }, ErrRefundExceedsCharge, nil},
				{"refund of nothing", func(ctx context.Context) (any, error) { return d.DashboardRefund(ctx, ch.ID, 0, "") }, ErrInvalidRequest, nil},
				{"refund", func(ctx context.Context) (any, error) {
					return d.DashboardRefund(ctx, ch.ID, 300, "requested_by_customer")
				}, nil,
					func(t *testing.T, v any) {
						if rf := v.(Refund); rf.ChargeID != ch.ID || rf.Amount != 300 || rf.Currency != "EUR" || rf.Status != RefundSucceeded {
							t.Errorf("refund %+v", rf)
						}
					}},
				{"dispute beyond the charge", func(ctx context.Context) (any, error) { return d.OpenDispute(ctx, ch.ID, 1001, "fraudulent") }, ErrInvalidRequest, nil},
				{"dispute of an unknown charge", func(ctx context.Context) (any, error) { return d.OpenDispute(ctx, "ch_nope", 1, "fraudulent") }, ErrNotFound, nil},
				{"close of an unknown dispute", func(ctx context.Context) (any, error) { return d.CloseDispute(ctx, "dp_nope", true) }, ErrNotFound, nil},
			}
			for _, s := range steps {
				v, err := s.do(ctx)
				if s.wantErr != nil {
					if !errors.Is(err, s.wantErr) {
						t.Errorf("%s: %v, want %v", s.name, err, s.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				s.check(t, v)
			}
			dp, err := d.OpenDispute(ctx, ch.ID, 500, "fraudulent")
			if err != nil || dp.ChargeID != ch.ID || dp.Amount != 500 || dp.Status != DisputeOpen || dp.Closed != nil {
				t.Fatalf("open dispute: %+v %v", dp, err)
			}
			closed, err := d.CloseDispute(ctx, dp.ID, false)
			if err != nil || closed.ID != dp.ID || closed.Status != DisputeLost || closed.Closed == nil {
				t.Fatalf("close dispute: %+v %v", closed, err)
			}
			if _, err := d.CloseDispute(ctx, dp.ID, true); !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("close a closed dispute: %v, want ErrInvalidRequest", err)
			}
		})
	}
}
