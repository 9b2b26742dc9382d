package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/catalog"
)

// putInput is the body of a conditional PUT (catalog.ProductInput, catalog.CartInput),
// decoded strictly and then validated against the id the path names.
type putInput[T any] interface {
	*T
	Validate(id string) []checkout.FieldError
}

// conditionalPut is the protocol of every PUT of a whole resource, written once, as
// keyedPost is for keyed POSTs: read the body, decode, validate (a body that fails changes
// nothing), then put with the request's If-Match / If-None-Match, which the domain checks
// under the resource's row lock. 201 with Location when the put created the resource, 200
// otherwise; ETag is the version it is at. No Idempotency-Key: a PUT is idempotent.
//
// put is the domain's write (catalog.Store.PutProduct, PutCart); version reads the
// version its view is at.
func conditionalPut[T any, P putInput[T], V any](a *handlers, c *gin.Context, id string,
	put func(ctx context.Context, clientID int64, id string, in T, pre catalog.Precondition) (V, bool, error),
	version func(V) int64) {
	body, p := readJSON(c.Request, a.maxBody)
	if p != nil {
		a.failRead(c, p)
		return
	}
	var in T
	if p := decodeStrict(body, &in); p != nil {
		a.failRead(c, p)
		return
	}
	if errs := P(&in).Validate(id); len(errs) > 0 {
		a.failRead(c, checkout.ValidationFailed(errs))
		return
	}
	v, created, err := put(c.Request.Context(), client(c).ID, id, in, precondition(c.Request.Header))
	if err != nil {
		a.failRead(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		c.Header("Location", c.Request.URL.Path)
	}
	c.Header("ETag", catalog.ETag(version(v)))
	c.JSON(status, v)
}

// precondition reads If-Match and If-None-Match: each tag of each header line, as sent.
func precondition(h http.Header) catalog.Precondition {
	return catalog.Precondition{IfMatch: entityTags(h.Values("If-Match")), IfNoneMatch: entityTags(h.Values("If-None-Match"))}
}

func entityTags(lines []string) []string {
	var out []string
	for _, l := range lines {
		for _, t := range strings.Split(l, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}
