package problempages

import (
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
)

var tags = regexp.MustCompile(`<[^>]*>`)

func serve(t *testing.T) *httptest.Server {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	e, err := server.NewEngine(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestEveryCodeHasAPage: the page of every code of the table renders, at the type its
// problems carry, with the code, what happened, what to do and an example problem of it;
// the index links to each.
func TestEveryCodeHasAPage(t *testing.T) {
	srv := serve(t)
	_, index := get(t, srv.URL+"/problems")
	for _, s := range problem.Codes {
		t.Run(string(s.Code), func(t *testing.T) {
			resp, page := get(t, srv.URL+problem.TypeURI(s.Code))
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
				t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			text := html.UnescapeString(tags.ReplaceAllString(page, ""))
			for _, want := range []string{
				string(s.Code), s.Title, s.Advice(),
				strings.ReplaceAll(s.Doc, "`", ""),                      // what happened
				string(problem.Of(s.Code).Advised().Body("/v1/orders")), // the example, as Write renders it
			} {
				if !strings.Contains(text, want) {
					t.Errorf("the page lacks %q", want)
				}
			}
			if s.RetryAfter > 0 && !strings.Contains(text, "Retry-After: ") {
				t.Errorf("the example lacks Retry-After")
			}
			if !strings.Contains(index, `href="`+problem.TypeURI(s.Code)+`"`) {
				t.Errorf("the index does not link to %s", problem.TypeURI(s.Code))
			}
			if resp.Header.Get("Content-Security-Policy") == "" {
				t.Errorf("no Content-Security-Policy")
			}
		})
	}
	resp, body := get(t, srv.URL+"/problems/no_such_code")
	if resp.StatusCode != 404 || !strings.Contains(body, `"code":"not_found"`) {
		t.Errorf("an unknown code: %d %s", resp.StatusCode, body)
	}
}

// TestTypesAreThePages: a table code's type is its page, relative; another service's code
// keeps a URN, since it has no page.
func TestTypesAreThePages(t *testing.T) {
	for _, s := range problem.Codes {
		if got := problem.TypeURI(s.Code); got != "/problems/"+string(s.Code) {
			t.Errorf("%s: type %q", s.Code, got)
		}
	}
	if got := problem.TypeURI("provider_timeout"); got != "urn:tekrar:problem:provider_timeout" {
		t.Errorf("a code outside the table: type %q", got)
	}
}
