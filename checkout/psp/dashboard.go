package psp

import (
	"context"
	"net/http"
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
