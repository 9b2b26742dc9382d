package apptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/internal/problem"
)

// contract checks every exchange of the API tests against the OpenAPI document
// (checkout/api/openapi.yaml), so the document cannot drift from what the server does:
//
//   - every response under /v1 and /webhooks must be one the document declares for the
//     operation (status, content type, body schema, headers), undeclared body members and
//     response headers included;
//   - a request the document allows is checked as sent, and a request the document refuses
//     (tests send bad ones on purpose) must be refused by the server too: a 2xx to it means
//     the document is stricter than the code;
//   - a method and path the document lacks must be one the server lacks too (404 or 405).
type contract struct {
	requests  validator.Validator
	responses validator.Validator
}

var (
	contractOnce sync.Once
	contractV    *contract
	contractErr  error
)

// loadContract builds the validators once per test binary.
func loadContract() (*contract, error) {
	contractOnce.Do(func() {
		mk := func(opts ...config.Option) (validator.Validator, error) {
			doc, err := libopenapi.NewDocument(api.OpenAPIJSON)
			if err != nil {
				return nil, fmt.Errorf("parse the OpenAPI document: %w", err)
			}
			v, errs := validator.NewValidator(doc, opts...)
			if len(errs) > 0 {
				return nil, fmt.Errorf("build the OpenAPI validator: %v", errs)
			}
			return v, nil
		}
		var c contract
		if c.requests, contractErr = mk(config.WithFormatAssertions()); contractErr != nil {
			return
		}
		// Strict for responses: a member or header the document does not declare is a
		// violation. X-Content-Type-Options is sent with every problem and is no part of the
		// contract.
		// Metadata is the client's own map: its members are not the document's to declare.
		if c.responses, contractErr = mk(config.WithFormatAssertions(), config.WithStrictMode(),
			config.WithStrictIgnoredHeadersExtra("x-content-type-options", "content-security-policy"),
			config.WithStrictIgnorePaths("$.body.metadata.*", "$.body.data[*].metadata.*")); contractErr != nil {
			return
		}
		if ok, errs := c.requests.ValidateDocument(); !ok {
			contractErr = fmt.Errorf("the OpenAPI document is not valid OpenAPI 3.1: %s", joinErrors(errs))
			return
		}
		contractV = &c
	})
	return contractV, contractErr
}

// covered reports whether the contract speaks about path: the API and the provider's
// webhook, not the console, the health checks or the problem pages.
func covered(path string) bool {
	return strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/webhooks/")
}

// check returns the violations of one exchange, each a sentence naming the request.
// reqBody and respBody are the bodies as sent and received.
func (c *contract) check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) []string {
	if !covered(req.URL.Path) || req.Method == http.MethodHead {
		return nil // HEAD is GET without a body (server.HeadAsGet), not an operation of its own
	}
	withBody := func() *http.Request {
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		r.ContentLength = int64(len(reqBody))
		return r
	}
	var out []string
	name := req.Method + " " + req.URL.Path
	ok, reqErrs := c.requests.ValidateHttpRequestSync(withBody())
	if !ok {
		for _, e := range reqErrs {
			if e.IsPathMissingError() || e.IsOperationMissingError() {
				// Not an operation of the document: the server must not serve it either.
				if (resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed) ||
					resp.Header.Get("Content-Type") != "application/problem+json" {
					out = append(out, fmt.Sprintf("%s: the OpenAPI document has no such operation, but the server answered %d %s",
						name, resp.StatusCode, respBody))
				}
				return out
			}
		}
		// A request the document refuses must not succeed, unless the answer is a replay:
		// a key's stored answer is replayed before the body is looked at (docs/api.md).
		if resp.StatusCode < 400 && resp.Header.Get("Idempotent-Replayed") != "true" {
			out = append(out, fmt.Sprintf("%s: the OpenAPI document refuses this request (%s), but the server answered %d",
				name, joinErrors(reqErrs), resp.StatusCode))
		}
	}
	r := &http.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(respBody)),
		ContentLength: int64(len(respBody)), Request: req}
	responses := c.responses
	if req.URL.Path == "/v1/openapi.json" {
		// The document itself: not strict, since its members are OpenAPI's, not its own
		// (TestOpenAPIServed compares it with the embedded one byte for byte).
		responses = c.requests
	}
	if ok, errs := responses.ValidateHttpResponse(withBody(), r); !ok {
		out = append(out, fmt.Sprintf("%s: response %d does not match the OpenAPI document: %s\nbody: %s",
			name, resp.StatusCode, joinErrors(errs), respBody))
	}
	return out
}

func joinErrors(errs []*verrors.ValidationError) string {
	s := make([]string, 0, len(errs))
	for _, e := range errs {
		msg := e.Message
		if e.Reason != "" {
			msg += " (" + e.Reason + ")"
		}
		for _, f := range e.SchemaValidationErrors {
			msg += "; " + f.Reason
			if f.FieldPath != "" {
				msg += " at " + f.FieldPath
			}
		}
		s = append(s, msg)
	}
	return strings.Join(s, " | ")
}

// checkedTransport sends requests through next and reports each exchange's violations of
// the contract to report (t.Errorf, which goroutines may call). It also follows the type of
// every problem it sees, once per page, to check that it resolves to the code's page.
type checkedTransport struct {
	next   http.RoundTripper
	report func(format string, args ...any)
	pages  sync.Map // page URL → struct{}: fetched and found right
}

func (t *checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil && req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		reqBody, _ = io.ReadAll(b)
		b.Close()
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || !covered(req.URL.Path) {
		return resp, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	c, err := loadContract()
	if err != nil {
		t.report("OpenAPI contract: %v", err)
		return resp, nil
	}
	for _, v := range c.check(req, reqBody, resp, respBody) {
		t.report("OpenAPI contract: %s", v)
	}
	if resp.Header.Get("Content-Type") == problem.ContentType {
		if msg := t.checkType(req, respBody); msg != "" {
			t.report("problem type: %s %s: %s", req.Method, req.URL.Path, msg)
		}
	}
	return resp, nil
}

// checkType checks that a problem's type, resolved against the URL requested (RFC 9457
// section 3.1.1), is the page of its code, and that the page is served and names the code.
func (t *checkedTransport) checkType(req *http.Request, body []byte) string {
	var p struct {
		Type string `json:"type"`
		Code string `json:"code"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Sprintf("not JSON: %v: %s", err, body)
	}
	ref, err := url.Parse(p.Type)
	if err != nil {
		return fmt.Sprintf("type %q is not a URI reference: %v", p.Type, err)
	}
	page := req.URL.ResolveReference(ref)
	if want := problem.PagesPath + p.Code; page.Host != req.URL.Host || page.Path != want {
		return fmt.Sprintf("type %q resolves to %s, not to the page of %q (%s)", p.Type, page, p.Code, want)
	}
	if _, ok := t.pages.Load(page.String()); ok {
		return ""
	}
	get, err := http.NewRequestWithContext(req.Context(), http.MethodGet, page.String(), nil)
	if err != nil {
		return err.Error()
	}
	resp, err := t.next.RoundTrip(get)
	if err != nil {
		return fmt.Sprintf("GET %s: %v", page, err)
	}
	html, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Sprintf("GET %s: %v", page, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!bytes.Contains(html, []byte(p.Code)) {
		return fmt.Sprintf("GET %s: %d %s, want the page of %s", page, resp.StatusCode, resp.Header.Get("Content-Type"), p.Code)
	}
	t.pages.Store(page.String(), struct{}{})
	return ""
}
