package api

import (
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// routeOwners are where a "/v1/ route string may be written in non-test Go, and why.
var routeOwners = map[string]string{
	"checkout/api/": "the API registers the routes (routes.go) and hands the domain what it needs of them",
	"checkout/sdk/": "the Go SDK calls the API by its routes",
	"internal/apptest/": "the API's contract harness: it tells the API's requests from the others " +
		"and serves the API's OpenAPI document, so it is on the API's side",
	"internal/problem/pages.go": "Spec.Example documents a problem as a client receives it from the API " +
		"(docs/problems.md); its instance is an example, not a route the code serves",
	"checkout/internal/plantest/": "test support only: it seeds millions of rows as the API would have " +
		"stored them, for the query-plan tests and the console's scale benchmark",
	"checkout/internal/checkouttest/": "test support only: the shared fixture of checkout's sub-packages' " +
		"tests places orders and refunds through the service with the requests the API's handlers make",
	"checkout/psp/stripe/stripetest/": "test support only: the fault layer in front of stripe-mock plays " +
		"Stripe's API, whose routes are Stripe's /v1, not tekrar's",
}

// TestNoRouteOutsideTheAPI keeps the routes where they are named once: the domain, the
// console and the shared packages know none (issue 27), so that a route is changed in the
// API alone and the domain cannot drift from it.
func TestNoRouteOutsideTheAPI(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, dir := range []string{"checkout", "internal", "admin"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			for owner := range routeOwners {
				if strings.HasPrefix(rel, owner) {
					return nil
				}
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(src), "\n") {
				// A route in Go ("/v1/…") or in a statement ('/v1/…'); prose that names a route
				// for a person (a comment, a message) is not one.
				if strings.Contains(line, `"/v1/`) || strings.Contains(line, `'/v1/`) {
					t.Errorf("%s:%d names a route: %s", rel, i+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestFingerprintSpecsMatchTheDocs: docs/fingerprints.md's table is FingerprintSpecs.
func TestFingerprintSpecsMatchTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/fingerprints.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- fingerprint specs -->\n", "<!-- end of fingerprint specs -->"
	i, j := strings.Index(string(doc), begin), strings.Index(string(doc), end)
	if i < 0 || j < i {
		t.Fatalf("docs/fingerprints.md has no %q ... %q section", begin, end)
	}
	var want strings.Builder
	want.WriteString("| Route | Version | Covered by identity, not text | Excluded | Covered with the body |\n|---|---|---|---|---|\n")
	none := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	for _, s := range FingerprintSpecs {
		card := ""
		if s.CardToken != "" {
			card = "`" + s.CardToken + "`: the card's fingerprint at the provider"
		}
		var excl []string
		for _, e := range s.Excluded {
			excl = append(excl, "`"+e+"`")
		}
		fmt.Fprintf(&want, "| `%s %s` | %d | %s | %s | %s |\n", s.Method, s.Route, s.Version, none(card),
			none(strings.Join(excl, ", ")), none(s.Bound))
	}
	if got := string(doc[i+len(begin) : j]); got != want.String() {
		t.Errorf("docs/fingerprints.md's table is\n%s\nFingerprintSpecs says\n%s", got, want.String())
	}
}

// TestKeyedRoutesAreRegistered: the routes the domain is handed are the ones Register
// mounts, so that a route renamed in one place and not the other fails here.
func TestKeyedRoutesAreRegistered(t *testing.T) {
	e := gin.New()
	Register(e.Group("/v1"), Deps{})
	mounted := map[string]bool{}
	for _, r := range e.Routes() {
		mounted[r.Method+" "+strings.ReplaceAll(r.Path, ":id", "{id}")] = true
	}
	for _, s := range FingerprintSpecs {
		if !mounted[s.Method+" "+s.Route] {
			t.Errorf("%s %s has a fingerprint spec, and Register does not mount it", s.Method, s.Route)
		}
	}
	if got := Routes.RefundPath("ord_1"); got != strings.ReplaceAll(Routes.Refund.Route, "{id}", "ord_1") {
		t.Errorf("RefundPath(ord_1) = %s, not a path of %s", got, Routes.Refund.Route)
	}
	if Routes.Order.Method != http.MethodPost || Routes.Refund.Method != http.MethodPost {
		t.Errorf("keyed routes are POSTs: %+v", Routes)
	}
}
