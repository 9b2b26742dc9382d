package app_test

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// get sends one request without following redirects.
func get(t *testing.T, e *apptest.Env, method, path string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// HEAD answers like GET without a body, on every kind of route (RFC 9110 requires both);
// before, HEAD /admin/login was 405.
func TestHeadAnswersLikeGet(t *testing.T) {
	e := apptest.New(t)
	for _, path := range []string{"/healthz", "/readyz", "/admin/login", "/static/css/tekrar.css", "/v1/client", "/v1/orders/ord_00000000000000000000000000000000", "/nowhere"} {
		t.Run(path, func(t *testing.T) {
			auth := []string{"Authorization", "Bearer " + e.Secret}
			g, gbody := get(t, e, "GET", path, auth...)
			h, hbody := get(t, e, "HEAD", path, auth...)
			if h.StatusCode != g.StatusCode {
				t.Errorf("HEAD %d, GET %d", h.StatusCode, g.StatusCode)
			}
			if len(gbody) == 0 {
				t.Errorf("GET %s has no body to compare with", path)
			}
			if len(hbody) != 0 {
				t.Errorf("HEAD has a body: %q", hbody)
			}
			if h.Header.Get("Content-Type") != g.Header.Get("Content-Type") {
				t.Errorf("HEAD Content-Type %q, GET %q", h.Header.Get("Content-Type"), g.Header.Get("Content-Type"))
			}
		})
	}
}

// A path no route has answers a browser with a page and anything else with problem JSON:
// before, a mistyped console address showed a browser raw JSON.
func TestUnknownPathsAnswerInKind(t *testing.T) {
	e := apptest.New(t)
	const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	cases := []struct {
		path, accept string
		status       int
		contentType  string
		says         string
		location     string
	}{
		{"/admin/no-such-page", browser, 404, "text/html; charset=utf-8", "There is no such page in the console.", ""},
		{"/admin/no-such-page", "application/json", 404, "application/problem+json", `"code":"not_found"`, ""},
		{"/admin/no-such-page", "", 404, "application/problem+json", `"code":"not_found"`, ""},
		{"/", browser, 303, "", "", "/admin/"},
		{"/", "application/json", 404, "application/problem+json", `"code":"not_found"`, ""},
		{"/v1/no-such-route", browser, 404, "application/problem+json", `"code":"not_found"`, ""},
	}
	for _, c := range cases {
		t.Run(c.path+" "+c.accept, func(t *testing.T) {
			resp, body := get(t, e, "GET", c.path, "Accept", c.accept)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if c.contentType != "" && resp.Header.Get("Content-Type") != c.contentType {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), c.contentType)
			}
			if !strings.Contains(string(body), c.says) {
				t.Errorf("body lacks %q: %s", c.says, body)
			}
			if c.location != "" && resp.Header.Get("Location") != c.location {
				t.Errorf("Location %q, want %q", resp.Header.Get("Location"), c.location)
			}
			if strings.HasPrefix(c.contentType, "text/html") {
				if !strings.Contains(string(body), "/static/css/tekrar.css") {
					t.Error("the console's not-found page is not in the console's layout")
				}
				if resp.Header.Get("Content-Security-Policy") == "" {
					t.Error("the console's not-found page lacks the console's security headers")
				}
			}
		})
	}
}
