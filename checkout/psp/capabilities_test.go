package psp

import (
	"slices"
	"testing"
	"time"
)

// TestCapabilityRows: every provider the issue names has a row, and each row is whole and
// consistent with itself.
func TestCapabilityRows(t *testing.T) {
	for _, p := range []string{ProviderSandbox, ProviderSandboxNoCancel, ProviderSandboxKeyLess, ProviderStripe, ProviderAdyen, ProviderPayPal,
		ProviderSquare, ProviderBraintree, ProviderCheckoutCom, ProviderIyzico} {
		if _, ok := CapabilityOf(p); !ok {
			t.Errorf("no row for %s", p)
		}
	}
	if _, ok := CapabilityOf("unknown"); ok {
		t.Error("CapabilityOf found a provider the table does not name")
	}
	seen := map[string]bool{}
	for _, c := range Capabilities() {
		if seen[c.Provider] {
			t.Errorf("%s has two rows", c.Provider)
		}
		seen[c.Provider] = true
		if len(c.Sources) == 0 || len(c.Errors) == 0 || c.WebhookSchedule == "" || c.Webhook.Where == "" {
			t.Errorf("%s: a row needs its sources, error rules and webhook: %+v", c.Provider, c)
		}
		if (c.KeysReplay == SupportNo) != (c.KeyWindow == 0) || (c.KeysReplay == SupportNo) != (c.KeyStores == StoresNothing) {
			t.Errorf("%s: keys replay %s, window %v, stores %s disagree", c.Provider, c.KeysReplay, c.KeyWindow, c.KeyStores)
		}
		if c.KeyWindow < DurationNotDocumented || c.WebhookRetries < DurationNotDocumented || c.FindLag < DurationNotDocumented {
			t.Errorf("%s: a negative duration other than DurationNotDocumented", c.Provider)
		}
		if !slices.ContainsFunc(c.Errors, func(r ErrorRule) bool { return r.Decision == DecisionDecline }) {
			t.Errorf("%s: no documented decline", c.Provider)
		}
		if !slices.ContainsFunc(c.Errors, func(r ErrorRule) bool { return r.Err == errUnknownAnswer }) {
			t.Errorf("%s: no rule for an answer whose outcome is unknown", c.Provider)
		}
	}
}

// TestErrorRulesAgreeWithAnswerTables: a rule's decision is what the charge answer table
// makes of the error the rule maps the answer to, so that a provider's answers can only be
// read the way every other provider's are.
func TestErrorRulesAgreeWithAnswerTables(t *testing.T) {
	allowed := map[Decision][]Verdict{
		DecisionDecline: {VerdictDone, VerdictRefused},
		DecisionRetry:   {VerdictUnknown},
		DecisionUnknown: {VerdictUnknown},
		DecisionRefused: {VerdictAttention, VerdictLookUp, VerdictRefused},
	}
	for _, c := range Capabilities() {
		for _, r := range c.Errors {
			v := r.Verdict()
			if !slices.Contains(allowed[r.Decision], v) {
				t.Errorf("%s %q: decision %s but the charge table says %s", c.Provider, r.Answer, r.Decision, v)
			}
			if r.Decision == DecisionDecline && v == VerdictDone && r.Err != nil {
				t.Errorf("%s %q: a decline that is done must be a result (a declined charge)", c.Provider, r.Answer)
			}
		}
	}
}

// TestMayResend: a re-send is allowed only under a key the provider still keeps, with a
// margin; never without keys or with a window the docs do not state.
func TestMayResend(t *testing.T) {
	window := func(d time.Duration) Capability {
		return Capability{KeysReplay: SupportYes, KeyWindow: d, KeyStores: StoresEveryAnswer}
	}
	for _, tc := range []struct {
		name  string
		c     Capability
		since time.Duration
		want  bool
	}{
		{"forever, long after", window(DurationForever), 365 * day, true},
		{"24h, at once", window(24 * time.Hour), 0, true},
		{"24h, a clock behind", window(24 * time.Hour), -time.Minute, true},
		{"24h, within the margin", window(24 * time.Hour), 24*time.Hour - 5*time.Minute, false},
		{"24h, just before the margin", window(24 * time.Hour), 24*time.Hour - 11*time.Minute, true},
		{"24h, past it", window(24 * time.Hour), 25 * time.Hour, false},
		{"a minute, 50s after", window(time.Minute), 50 * time.Second, true},
		{"a minute, 55s after", window(time.Minute), 55 * time.Second, false},
		{"not documented", window(DurationNotDocumented), 0, false},
		{"no keys", Capability{KeysReplay: SupportNo, KeyStores: StoresNothing}, 0, false},
		{"keys not documented", Capability{KeysReplay: SupportNotDocumented, KeyWindow: DurationForever}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MayResend(tc.c, tc.since); got != tc.want {
				t.Errorf("MayResend = %v, want %v", got, tc.want)
			}
			if got := MustLookUpFirst(tc.c, tc.since); got == tc.want {
				t.Errorf("MustLookUpFirst = %v, want %v", got, !tc.want)
			}
		})
	}
}

// TestDecisionsOfTheTable: what the recovery will read of each provider's row. A provider
// without keys or past its window is looked up before anything is sent; only a cancel that
// refuses a charge in flight fences.
func TestDecisionsOfTheTable(t *testing.T) {
	for _, tc := range []struct {
		provider     string
		fresh, late  bool // MayResend a minute after the first send, and two days after
		fence        bool
		lookUp       LookUp
		complete     bool          // LookUpComplete two hours after the charge
		webhooksLate time.Duration // at least this late an event may still arrive
	}{
		{ProviderSandbox, true, true, true, LookUpByKey, true, DurationForever},
		{ProviderSandboxNoCancel, true, true, false, LookUpByKey, true, DurationForever},
		{ProviderSandboxKeyLess, false, false, false, LookUpByReference, true, 30*time.Minute + 10*time.Second},
		{ProviderStripe, true, false, true, LookUpByReference, true, 3 * day},
		{ProviderAdyen, true, true, false, LookUpNone, false, 30 * day},
		{ProviderPayPal, true, false, false, LookUpNone, false, 3 * day},
		{ProviderSquare, false, false, false, LookUpByListing, false, 3 * day},
		{ProviderBraintree, true, true, false, LookUpByListing, false, DurationNotDocumented},
		{ProviderCheckoutCom, true, false, false, LookUpByReference, false, DurationNotDocumented},
		{ProviderIyzico, false, false, false, LookUpByReference, false, 45 * time.Minute},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			c, ok := CapabilityOf(tc.provider)
			if !ok {
				t.Fatal("no row")
			}
			if got := MayResend(c, time.Minute); got != tc.fresh {
				t.Errorf("MayResend after a minute = %v, want %v", got, tc.fresh)
			}
			if got := MayResend(c, 2*day); got != tc.late {
				t.Errorf("MayResend after two days = %v, want %v", got, tc.late)
			}
			if got := CanFence(c); got != tc.fence {
				t.Errorf("CanFence = %v, want %v (fence %s)", got, tc.fence, c.Fence)
			}
			if got := LookUpBy(c); got != tc.lookUp {
				t.Errorf("LookUpBy = %s, want %s", got, tc.lookUp)
			}
			if got := LookUpComplete(c, 2*time.Hour); got != tc.complete {
				t.Errorf("LookUpComplete after two hours = %v, want %v", got, tc.complete)
			}
			if c.WebhookRetries != tc.webhooksLate {
				t.Errorf("webhook retries %v, want %v", c.WebhookRetries, tc.webhooksLate)
			}
		})
	}
}

// TestCanFence: every fence value, as CanFence reads it.
func TestCanFence(t *testing.T) {
	for f, want := range map[Fence]bool{
		FenceCancelByKey: true, FenceCancelByID: true,
		FenceVoidByKey: false, FenceVoidByReference: false, FenceVoidByID: false,
		FenceNone: false, FenceNotDocumented: false,
	} {
		if got := CanFence(Capability{Fence: f}); got != want {
			t.Errorf("CanFence(%s) = %v, want %v", f, got, want)
		}
	}
}

// TestLookUpBy: the most precise way the provider documents wins; a way that is not
// documented is no way.
func TestLookUpBy(t *testing.T) {
	y, n, u := SupportYes, SupportNo, SupportNotDocumented
	for _, tc := range []struct {
		key, ref, list Support
		want           LookUp
	}{
		{y, y, y, LookUpByKey},
		{n, y, y, LookUpByReference},
		{n, u, y, LookUpByListing},
		{u, u, u, LookUpNone},
		{n, n, n, LookUpNone},
	} {
		c := Capability{FindByKey: tc.key, FindByReference: tc.ref, FindByListing: tc.list}
		if got := LookUpBy(c); got != tc.want {
			t.Errorf("LookUpBy(key %s, reference %s, listing %s) = %s, want %s", tc.key, tc.ref, tc.list, got, tc.want)
		}
	}
}

// TestLookUpComplete: "not found" is believed only once the provider's look-up has caught up
// with what was written, and never when how long that takes is not documented, or when there
// is no way to look.
func TestLookUpComplete(t *testing.T) {
	byRef := func(lag time.Duration) Capability {
		return Capability{FindByKey: SupportNo, FindByReference: SupportYes, FindLag: lag}
	}
	for _, tc := range []struct {
		name  string
		c     Capability
		since time.Duration
		want  bool
	}{
		{"reads what was written, at once", byRef(0), 0, true},
		{"an hour's lag, a minute after", byRef(time.Hour), time.Minute, false},
		{"an hour's lag, an hour after", byRef(time.Hour), time.Hour, true},
		{"lag not documented, a day after", byRef(DurationNotDocumented), day, false},
		{"no way to look", Capability{FindByKey: SupportNo, FindByReference: SupportNotDocumented, FindByListing: SupportNo}, day, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LookUpComplete(tc.c, tc.since); got != tc.want {
				t.Errorf("LookUpComplete = %v, want %v", got, tc.want)
			}
		})
	}
}
