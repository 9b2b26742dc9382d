package psp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
)

// TestProvidersSayWhatTheyPromise: the sandbox says its row by its options, in process and
// over HTTP (GET /capability, asked once), and a provider that says nothing is taken for the
// least any provider promises.
func TestProvidersSayWhatTheyPromise(t *testing.T) {
	row := func(name string) Capability {
		c, ok := CapabilityOf(name)
		if !ok {
			t.Fatalf("no row %q", name)
		}
		return c
	}
	for _, tc := range []struct {
		opts SandboxOptions
		want Capability
	}{
		{SandboxOptions{}, row(ProviderSandbox)},
		{SandboxOptions{NoCancel: true}, row(ProviderSandboxNoCancel)},
		{SandboxOptions{KeyLess: true}, row(ProviderSandboxKeyLess)},
	} {
		t.Run(tc.want.Provider, func(t *testing.T) {
			forEachProvider(t, tc.opts, func(t *testing.T, p Provider, _ *Sandbox) {
				if got := PromisesOf(p); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("PromisesOf = %+v, want %+v", got, tc.want)
				}
			})
		})
	}

	t.Run("undeclared", func(t *testing.T) {
		var p struct{ Provider }
		got := PromisesOf(p)
		if got.Provider != ProviderUndeclared || MayResend(got, 0) || CanFence(got) ||
			LookUpBy(got) != LookUpByKey || LookUpComplete(got, 0) {
			t.Errorf("PromisesOf(a provider that says nothing) = %+v: it must never re-send, fence or take a not-found as final", got)
		}
		if _, err := ChargesByReference(context.Background(), p, "order ord_1"); !errors.Is(err, ErrLookupUnsupported) {
			t.Errorf("ChargesByReference of a provider that finds none so: %v, want ErrLookupUnsupported", err)
		}
	})

	t.Run("client asks once, and again after a failure", func(t *testing.T) {
		sb := newSandbox(t, SandboxOptions{NoCancel: true})
		h := NewHandler(sb, nil)
		var asked atomic.Int32
		var down atomic.Bool
		down.Store(true)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/capability" {
				asked.Add(1)
				if down.Load() {
					http.Error(w, "down", http.StatusBadGateway)
					return
				}
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		c := NewClient(srv.URL, srv.Client())
		if got := c.Capability(); got.Provider != ProviderUndeclared {
			t.Fatalf("with the server failing: %q, want %q until it answers", got.Provider, ProviderUndeclared)
		}
		down.Store(false)
		for range 3 {
			if got := c.Capability(); !reflect.DeepEqual(got, row(ProviderSandboxNoCancel)) {
				t.Fatalf("Capability = %+v, want the no-cancel row", got)
			}
		}
		if n := asked.Load(); n != 2 {
			t.Errorf("GET /capability asked %d times, want 2 (one failure, then kept)", n)
		}
	})
}
