package main

// `tekrar psp refund|dispute|close-dispute` against a real `tekrar psp` process: what they do
// is exactly the provider's ledger rows and events, and what they refuse changes nothing.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/proctest"
)

// pspLedger is what the sandbox holds about one charge, in a comparable form.
type pspLedger struct {
	Refunds  []string // "amount reason key-prefix"
	Disputes []string // "id amount reason status closed"
	Events   []string // types in sequence order
	Refunded int64
}

func readPSPLedger(t *testing.T, db *sqlx.DB, chargeID string) pspLedger {
	t.Helper()
	var l pspLedger
	if err := db.Select(&l.Refunds, `
		SELECT amount || ' ' || reason || ' ' || split_part(key, '_', 1) FROM psp_refunds
		 WHERE charge_id = $1 ORDER BY seq`, chargeID); err != nil {
		t.Fatal(err)
	}
	if err := db.Select(&l.Disputes, `
		SELECT id || ' ' || amount || ' ' || reason || ' ' || status || ' ' || (closed_at IS NOT NULL)
		  FROM psp_disputes WHERE charge_id = $1 ORDER BY created_at`, chargeID); err != nil {
		t.Fatal(err)
	}
	if err := db.Select(&l.Events, `SELECT type FROM psp_events WHERE charge_id = $1 ORDER BY seq`, chargeID); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&l.Refunded, `SELECT refunded_amount FROM psp_charges WHERE id = $1`, chargeID); err != nil {
		t.Fatal(err)
	}
	return l
}

// allPSPRows counts every row of the provider's tables, so that a refused command is seen to
// have written nowhere, not only not on the charge it named.
func allPSPRows(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	return fmt.Sprintf("charges %d refunds %d disputes %d events %d",
		countRows(t, db, `SELECT count(*) FROM psp_charges`), countRows(t, db, `SELECT count(*) FROM psp_refunds`),
		countRows(t, db, `SELECT count(*) FROM psp_disputes`), countRows(t, db, `SELECT count(*) FROM psp_events`))
}

// TestPSPDashboardCommands: a charge refunded in part, disputed and the dispute lost, each
// through the command line; every refusal (unknown charge or dispute, too much, a bad
// outcome, a dispute closed twice) exits non-zero with the provider's reason and changes
// nothing.
func TestPSPDashboardCommands(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	// The sandbox records events only when it has somewhere to send them.
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hooks.Close)
	addr := addrOf(freePorts(t, 1)[0])
	base := "http://" + addr
	p := startTekrar(t, childEnv("DATABASE_URL="+dbURL, "TEKRAR_PSP_ADDR="+addr,
		"TEKRAR_PSP_WEBHOOK_URL="+hooks.URL, "TEKRAR_PSP_WEBHOOK_SECRET="+stdwebhook.NewSecret()), nil, "psp")
	proctest.WaitUp(t, p.Proc, base, "/charges/none", 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := psp.NewClient(base, nil).Charge(ctx, psp.ChargeRequest{Key: "cli-1", Amount: 1000, Currency: "EUR", CardToken: "tok_visa"})
	if err != nil || ch.Status != psp.StatusSucceeded {
		t.Fatalf("charge: %+v %v", ch, err)
	}
	env := childEnv() // the URL comes by flag, except where a case sets TEKRAR_PSP_URL
	url := "--psp-url=" + base

	// refuse runs a command that must fail: exit code, the provider's reason on stderr's one
	// line, nothing on stdout, no row written anywhere.
	refuse := func(t *testing.T, code int, want string, env []string, args ...string) {
		t.Helper()
		before, rows := readPSPLedger(t, db, ch.ID), allPSPRows(t, db)
		stdout, stderr, got := runTekrar(t, env, nil, args...)
		if got != code {
			t.Errorf("tekrar %v exited %d, want %d\nstderr: %s", args, got, code, stderr)
		}
		line := oneLine(t, "stderr", stderr)
		if prefix := "tekrar psp " + args[1] + ": "; !strings.HasPrefix(line, prefix) || !strings.Contains(line, want) {
			t.Errorf("tekrar %v: stderr %q, want %q... naming %q", args, line, prefix, want)
		}
		if stdout != "" {
			t.Errorf("tekrar %v printed %q on stdout", args, stdout)
		}
		if after := readPSPLedger(t, db, ch.ID); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("tekrar %v changed the ledger:\nbefore %+v\nafter  %+v", args, before, after)
		}
		if after := allPSPRows(t, db); after != rows {
			t.Errorf("tekrar %v wrote rows: before %s, after %s", args, rows, after)
		}
	}
	refusals := []struct {
		name string
		code int
		want string
		args []string
	}{
		{"refund of an unknown charge", 1, "404 not_found", []string{"psp", "refund", "ch_nope", "--amount", "100", url}},
		{"refund beyond the charge", 1, "422 refund_exceeds_charge", []string{"psp", "refund", ch.ID, "--amount", "1001", url}},
		{"refund without an amount", 2, "--amount is required", []string{"psp", "refund", ch.ID, url}},
		{"refund of a negative amount", 2, "--amount", []string{"psp", "refund", ch.ID, "--amount=-5", url}},
		{"dispute of an unknown charge", 1, "404 not_found", []string{"psp", "dispute", "ch_nope", "--amount", "100", url}},
		{"dispute beyond the charge", 1, "400 bad_request", []string{"psp", "dispute", ch.ID, "--amount", "1001", url}},
		{"close of an unknown dispute", 1, "404 not_found", []string{"psp", "close-dispute", "dp_nope", "--outcome", "won", url}},
		{"no provider there", 1, "connection refused", []string{"psp", "refund", ch.ID, "--amount", "1", "--psp-url", "http://" + addrOf(freePorts(t, 1)[0])}},
	}
	for _, tc := range refusals {
		t.Run("before/"+tc.name, func(t *testing.T) { refuse(t, tc.code, tc.want, env, tc.args...) })
	}

	// A refund of 300 of the 1000, by flag.
	out := mustRun(t, env, nil, "psp", "refund", ch.ID, "--amount", "300", "--reason", "requested_by_customer", url)
	if want := regexp.MustCompile(`^refund re_\S+: 300 EUR of ` + regexp.QuoteMeta(ch.ID) + "\n$"); !want.MatchString(out) {
		t.Errorf("refund printed %q, want %v", out, want)
	}
	// Now 701 is more than is left.
	refuse(t, 1, "422 refund_exceeds_charge", env, "psp", "refund", ch.ID, "--amount", "701", url)

	// A dispute of 500, the URL from the environment, the answer as JSON.
	out = mustRun(t, childEnv("TEKRAR_PSP_URL="+base), nil, "psp", "dispute", ch.ID, "--amount", "500", "--reason", "fraudulent", "--json")
	var dp psp.Dispute
	if err := json.Unmarshal([]byte(out), &dp); err != nil {
		t.Fatalf("dispute --json printed %q: %v", out, err)
	}
	if !strings.HasPrefix(dp.ID, "dp_") || dp.ChargeID != ch.ID || dp.Amount != 500 || dp.Reason != "fraudulent" || dp.Status != psp.DisputeOpen {
		t.Errorf("dispute --json printed %+v", dp)
	}

	refuse(t, 2, `--outcome "maybe": want won or lost`, env, "psp", "close-dispute", dp.ID, "--outcome", "maybe", url)
	refuse(t, 2, "--outcome", env, "psp", "close-dispute", dp.ID, url)

	out = mustRun(t, env, nil, "psp", "close-dispute", dp.ID, "--outcome", "lost", url)
	if want := fmt.Sprintf("dispute %s lost: 500 of %s\n", dp.ID, ch.ID); out != want {
		t.Errorf("close-dispute printed %q, want %q", out, want)
	}
	refuse(t, 1, "400 bad_request", env, "psp", "close-dispute", dp.ID, "--outcome", "won", url)

	want := pspLedger{
		Refunds:  []string{"300 requested_by_customer dashboard"},
		Disputes: []string{dp.ID + " 500 fraudulent lost true"},
		Events: []string{psp.EventChargeSucceeded, psp.EventRefundSucceeded, psp.EventDisputeCreated,
			psp.EventDisputeClosed},
		Refunded: 300,
	}
	if got := readPSPLedger(t, db, ch.ID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the provider holds\n%+v\nwant\n%+v", got, want)
	}
	if got, want := allPSPRows(t, db), "charges 1 refunds 1 disputes 1 events 4"; got != want {
		t.Errorf("the provider's tables hold %s, want %s", got, want)
	}
	for _, tc := range refusals {
		t.Run("after/"+tc.name, func(t *testing.T) { refuse(t, tc.code, tc.want, env, tc.args...) })
	}
}
