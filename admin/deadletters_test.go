package admin_test

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/inbox"
	"github.com/tekrar/tekrar/internal/apptest"
)

// The inbox page lists the dead letters (signed provider events tekrar could not store) and
// ?view=dead lists only them; an admin replays one with a confirmed, CSRF-protected form, once
// tekrar can take it: it is applied as a delivery would be, marked replayed and audited, and
// a second post changes nothing. One tekrar still cannot take stays dead, with the reason
// shown. A viewer has no replay.
func TestInboxDeadLetters(t *testing.T) {
	e := apptest.New(t)
	ctx := t.Context()
	good := []byte(`{"id":"evt_ok","type":"charge.succeeded","data":{"charge_id":"ch_ok","charge_key":"k_ok","sequence":1,"amount":100,"currency":"TRY","status":"succeeded"}}`)
	bad := []byte(`{"id":"evt_nul","type":"charge.succeeded","data":{"charge_id":"ch_nul","charge_key":"k","sequence":1,"description":"a\u0000b"}}`)
	for id, body := range map[string][]byte{"evt_ok": good, "evt_nul": bad} {
		if err := e.App.Inbox.DeadLetter(ctx, "psp", id, body, &inbox.UnstorableEventError{Reason: inbox.DeadRefusedByStore, Detail: "22003 <b>out of range</b>"}); err != nil {
			t.Fatal(err)
		}
	}
	idOf := func(webhookID string) int64 {
		return actInt(t, e, `SELECT id FROM provider_dead_letters WHERE webhook_id = $1`, webhookID)
	}
	viewer := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	p := viewer.do("GET", "/admin/inbox?view=dead", nil)
	if p.status != http.StatusOK {
		t.Fatalf("dead letters: %d %s", p.status, p.body)
	}
	if n := p.doc.Find("table.dead-letters tbody tr").Length(); n != 2 {
		t.Errorf("%d dead letters listed, want 2", n)
	}
	if p.doc.Find("table.inbox").Length() != 0 || p.doc.Find("table.refusals").Length() != 0 {
		t.Error("?view=dead lists more than the dead letters")
	}
	if !strings.Contains(p.body, "2 signed provider events could not be stored") {
		t.Error("no warning of the waiting dead letters")
	}
	if strings.Contains(p.body, "<b>out of range</b>") {
		t.Error("a dead letter's detail was rendered as markup")
	}
	if p.doc.Find("a.replay").Length() != 0 {
		t.Error("a viewer is offered a replay")
	}
	replay := func(webhookID string) string {
		return "/admin/inbox/dead/" + strconv.FormatInt(idOf(webhookID), 10) + "/replay"
	}
	if s := viewer.do("GET", replay("evt_ok"), nil).status; s != http.StatusForbidden {
		t.Errorf("a viewer's replay form: %d, want 403", s)
	}

	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	list := b.do("GET", "/admin/inbox", nil)
	if list.doc.Find(`a.replay[href="`+replay("evt_ok")+`"]`).Length() != 1 {
		t.Fatalf("no replay link on the dead letter: %s", list.body)
	}
	form := actForm(t, b.do("GET", replay("evt_ok"), nil), replay("evt_ok"))
	noCSRF := url.Values{}
	for k, v := range form {
		if k != "csrf" {
			noCSRF[k] = v
		}
	}
	if s := b.do("POST", replay("evt_ok"), noCSRF).status; s != http.StatusForbidden {
		t.Errorf("a replay without the CSRF token: %d, want 403", s)
	}
	if n := actInt(t, e, `SELECT count(*) FROM provider_events`); n != 0 {
		t.Fatalf("a refused form replayed %d events", n)
	}
	for i := range 2 {
		if r := b.do("POST", replay("evt_ok"), form); r.status != http.StatusSeeOther {
			t.Fatalf("replay %d: %d %s, want 303 to the dead letters", i+1, r.status, r.body)
		}
	}
	if n := actInt(t, e, `SELECT count(*) FROM provider_events WHERE event_id = 'evt_ok' AND outcome = 'applied'`); n != 1 {
		t.Errorf("%d applied events after the replay, want 1", n)
	}
	if n := actInt(t, e, `SELECT count(*) FROM provider_dead_letters WHERE webhook_id = 'evt_ok' AND state = 'replayed' AND replay_outcome = 'applied'`); n != 1 {
		t.Error("the replayed dead letter is not marked replayed")
	}
	if n := actInt(t, e, `SELECT count(*) FROM audit_log WHERE action = 'replay_dead_letter' AND target = $1`, "provider_dead_letter:"+strconv.FormatInt(idOf("evt_ok"), 10)); n != 1 {
		t.Errorf("%d audit entries, want 1", n)
	}

	still := b.do("POST", replay("evt_nul"), actForm(t, b.do("GET", replay("evt_nul"), nil), replay("evt_nul")))
	if still.status != http.StatusUnprocessableEntity || !strings.Contains(still.body, "still cannot take it") || !strings.Contains(still.body, "NUL") {
		t.Errorf("replay of an unstorable one: %d %s", still.status, still.body)
	}
	if _, err := e.App.Inbox.ReplayDeadLetter(ctx, idOf("evt_nul")); !errors.As(err, new(*inbox.UnstorableEventError)) {
		t.Errorf("replay of an unstorable one: %v", err)
	}
	if n := actInt(t, e, `SELECT count(*) FROM provider_dead_letters WHERE webhook_id = 'evt_nul' AND state = 'dead'`); n != 1 {
		t.Error("an unstorable dead letter left its state")
	}
	if s := b.do("GET", "/admin/inbox/dead/999999/replay", nil).status; s != http.StatusNotFound {
		t.Errorf("no such dead letter: %d, want 404", s)
	}
}
