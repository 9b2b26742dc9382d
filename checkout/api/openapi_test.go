package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/problem"
)

// document is the part of the OpenAPI document these tests read.
type document struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas struct {
			ProblemCode struct {
				Enum []string `json:"enum"`
			} `json:"ProblemCode"`
			EventType struct {
				Enum []string `json:"enum"`
			} `json:"EventType"`
			Order struct {
				Properties struct {
					Status struct {
						Enum []string `json:"enum"`
					} `json:"status"`
				} `json:"properties"`
			} `json:"Order"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadDocument(t *testing.T) document {
	t.Helper()
	var d document
	if err := json.Unmarshal(api.OpenAPIJSON, &d); err != nil {
		t.Fatalf("the OpenAPI document is not JSON: %v", err)
	}
	return d
}

var ginParam = regexp.MustCompile(`:([A-Za-z_]+)`)

// documentedPaths are the prefixes whose every route the document must describe.
func documentedPath(p string) bool {
	return strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/webhooks/")
}

// TestOpenAPICoversEveryRoute compares the router's routes under /v1 and /webhooks with the
// document's operations, both ways: a route the document lacks, or an operation no route
// serves, fails with its method and path.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) {
		c.PSPWebhookSecrets = stdwebhook.NewSecret()
		c.StripeWebhookSecret = "whsec_openapi"
	})
	served := map[string]bool{}
	for _, r := range e.App.Routes() {
		if documentedPath(r.Path) {
			served[r.Method+" "+ginParam.ReplaceAllString(r.Path, "{$1}")] = true
		}
	}
	documented := map[string]bool{}
	for path, item := range loadDocument(t).Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				documented[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	var missing, stale []string
	for op := range served {
		if !documented[op] {
			missing = append(missing, op)
		}
	}
	for op := range documented {
		if !served[op] {
			stale = append(stale, op)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	for _, op := range missing {
		t.Errorf("%s is served but the OpenAPI document (checkout/api/openapi.yaml) lacks it", op)
	}
	for _, op := range stale {
		t.Errorf("the OpenAPI document (checkout/api/openapi.yaml) has %s, which no route serves", op)
	}
	if len(served) < 20 {
		t.Fatalf("only %d routes found under /v1 and /webhooks: %v", len(served), served)
	}
}

// TestOpenAPIDocumentIsValid checks the document against the OpenAPI 3.1 schema.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc, err := libopenapi.NewDocument(api.OpenAPIJSON)
	if err != nil {
		t.Fatal(err)
	}
	if doc.GetVersion() != "3.1.0" {
		t.Errorf("OpenAPI version %q, want 3.1.0", doc.GetVersion())
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Error(e)
		}
	}
}

// TestOpenAPIProblemCodes keeps the document's list of problem codes the table's.
func TestOpenAPIProblemCodes(t *testing.T) {
	var want []string
	for _, s := range problem.Codes {
		want = append(want, string(s.Code))
	}
	got := loadDocument(t).Components.Schemas.ProblemCode.Enum
	if !slices.Equal(got, want) {
		t.Errorf("components.schemas.ProblemCode.enum in checkout/api/openapi.yaml is not problem.Codes, in its order:\ngot  %v\nwant %v", got, want)
	}
}

// TestOpenAPIEventTypes keeps the document's list of event types an endpoint subscribes to
// the outbox's.
func TestOpenAPIEventTypes(t *testing.T) {
	if got := loadDocument(t).Components.Schemas.EventType.Enum; !slices.Equal(got, outbox.Types) {
		t.Errorf("components.schemas.EventType.enum in checkout/api/openapi.yaml is not outbox.Types, in its order:\ngot  %v\nwant %v", got, outbox.Types)
	}
}

// TestOpenAPIOrderStatuses keeps the document's order statuses checkout's (which a test of
// checkout keeps the schema's).
func TestOpenAPIOrderStatuses(t *testing.T) {
	got := slices.Sorted(slices.Values(loadDocument(t).Components.Schemas.Order.Properties.Status.Enum))
	if want := slices.Sorted(slices.Values(checkout.OrderStatuses.Members())); !slices.Equal(got, want) {
		t.Errorf("components.schemas.Order.properties.status.enum in checkout/api/openapi.yaml is not checkout.OrderStatuses:\ngot  %v\nwant %v", got, want)
	}
}

// TestOpenAPIServed: GET /v1/openapi.json, without credentials, is the embedded document.
func TestOpenAPIServed(t *testing.T) {
	e := apptest.New(t)
	r := e.Do(t, "GET", "/v1/openapi.json", "", nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/json" || !bytes.Equal(r.Body, api.OpenAPIJSON) {
		t.Fatalf("status %d, type %q, %d bytes (want %d)", r.Status, r.Header.Get("Content-Type"), len(r.Body), len(api.OpenAPIJSON))
	}
	var d map[string]any
	if err := json.Unmarshal(r.Body, &d); err != nil || d["openapi"] != "3.1.0" {
		t.Fatalf("not an OpenAPI 3.1 document: %v %v", err, fmt.Sprint(d["openapi"]))
	}
}
