package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/goccy/go-yaml"
)

// openAPIYAML is the OpenAPI 3.1 document of the API, written by hand and reviewed with the
// code: the one source of what /v1 promises. The API tests validate every request and
// response against it (internal/apptest), so it cannot drift from the handlers.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPIJSON is the document as JSON, what GET /v1/openapi.json serves; it is converted
// once, when the package loads (a document that does not convert fails every test).
var OpenAPIJSON = func() []byte {
	j, err := yaml.YAMLToJSON(openAPIYAML)
	if err != nil {
		panic(fmt.Sprintf("checkout/api/openapi.yaml: %v", err))
	}
	var b bytes.Buffer
	if err := json.Indent(&b, j, "", "  "); err != nil {
		panic(fmt.Sprintf("checkout/api/openapi.yaml as JSON: %v", err))
	}
	b.WriteByte('\n')
	return b.Bytes()
}()

// serveOpenAPI answers GET /v1/openapi.json. It needs no credentials: the document is what
// a client's developer reads before having any.
func serveOpenAPI(c *gin.Context) {
	c.Header("Content-Length", strconv.Itoa(len(OpenAPIJSON)))
	c.Data(http.StatusOK, "application/json", OpenAPIJSON)
}
