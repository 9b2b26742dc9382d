package psp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Dashboard is what a merchant does in the sandbox's dashboard, outside tekrar: the Sandbox
// does it, and a Client asks a `tekrar psp` process to (`tekrar psp refund`, `dispute`,
// `close-dispute`). The provider decides every rule (an unknown charge is ErrNotFound, a
// refund beyond the charge ErrRefundExceedsCharge, a closed dispute ErrInvalidRequest).
type Dashboard interface {
	DashboardRefund(ctx context.Context, chargeID string, amount int64, reason string) (Refund, error)
	OpenDispute(ctx context.Context, chargeID string, amount int64, reason string) (Dispute, error)
	CloseDispute(ctx context.Context, disputeID string, won bool) (Dispute, error)
}

var (
	_ Dashboard = (*Sandbox)(nil)
	_ Dashboard = (*Client)(nil)
)

// dashboard serves the sandbox's dashboard actions over HTTP.
type dashboard struct {
	h  *handler
	sb *Sandbox
}

type dashboardAmount struct {
	Amount int64  `json:"amount"`
	Reason string `json:"reason"`
}

func (d *dashboard) refund(w http.ResponseWriter, r *http.Request) {
	var in dashboardAmount
	var noKey string
	if !d.h.decode(w, r, &in, &noKey) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	rf, err := d.sb.DashboardRefund(ctx, r.PathValue("id"), in.Amount, in.Reason)
	d.h.answer(w, r, rf, err)
}

func (d *dashboard) openDispute(w http.ResponseWriter, r *http.Request) {
	var in dashboardAmount
	var noKey string
	if !d.h.decode(w, r, &in, &noKey) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	dp, err := d.sb.OpenDispute(ctx, r.PathValue("id"), in.Amount, in.Reason)
	d.h.answer(w, r, dp, err)
}

func (d *dashboard) closeDispute(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Won bool `json:"won"`
	}
	var noKey string
	if !d.h.decode(w, r, &in, &noKey) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	dp, err := d.sb.CloseDispute(ctx, r.PathValue("id"), in.Won)
	d.h.answer(w, r, dp, err)
}

// DashboardRefund implements Dashboard over HTTP.
func (c *Client) DashboardRefund(ctx context.Context, chargeID string, amount int64, reason string) (Refund, error) {
	var rf Refund
	path := "/dashboard/charges/" + url.PathEscape(chargeID) + "/refunds"
	err := c.do(ctx, http.MethodPost, path, dashboardAmount{Amount: amount, Reason: reason}, &rf, true)
	if err == nil && (rf.ID == "" || rf.Status != RefundSucceeded) {
		err = fmt.Errorf("psp: POST %s: the provider answered an unreadable refund (status %q)", path, rf.Status)
	}
	return rf, err
}

// OpenDispute implements Dashboard over HTTP.
func (c *Client) OpenDispute(ctx context.Context, chargeID string, amount int64, reason string) (Dispute, error) {
	var dp Dispute
	path := "/dashboard/charges/" + url.PathEscape(chargeID) + "/disputes"
	err := c.do(ctx, http.MethodPost, path, dashboardAmount{Amount: amount, Reason: reason}, &dp, true)
	if err == nil && (dp.ID == "" || dp.Status != DisputeOpen) {
		err = fmt.Errorf("psp: POST %s: the provider answered an unreadable dispute (status %q)", path, dp.Status)
	}
	return dp, err
}

// CloseDispute implements Dashboard over HTTP.
func (c *Client) CloseDispute(ctx context.Context, disputeID string, won bool) (Dispute, error) {
	var dp Dispute
	path := "/dashboard/disputes/" + url.PathEscape(disputeID) + "/close"
	in := struct {
		Won bool `json:"won"`
	}{won}
	err := c.do(ctx, http.MethodPost, path, in, &dp, true)
	if err == nil && (dp.ID == "" || (dp.Status != DisputeWon && dp.Status != DisputeLost)) {
		err = fmt.Errorf("psp: POST %s: the provider answered an unreadable dispute (status %q)", path, dp.Status)
	}
	return dp, err
}
