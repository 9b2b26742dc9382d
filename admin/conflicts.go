package admin

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/views"
)

// conflictKinds are the event kinds behind each choice of the conflicts page's kind filter
// (views.ConflictKinds), and what its empty list says.
var conflictKinds = map[string]struct {
	kinds []string
	empty string
}{
	"conflicts": {[]string{checkout.KindReusedConflict}, "No conflicts match."},
	"in-flight": {[]string{checkout.KindInUseRejected}, "No in-flight rejections match."},
	"both":      {[]string{checkout.KindReusedConflict, checkout.KindInUseRejected}, "No conflicts or in-flight rejections match."},
}

// conflicts lists keys sent again with another request, and repeats that came while
// the first was still being worked on: both usually a bug in the app that sent them.
func (a *console) conflicts(c *gin.Context) error {
	p := views.HistoryPage{Nav: nav(c, "Conflicts"), Title: "Conflicts", Path: "/admin/conflicts",
		Intro: "Keys sent again with another request (refused), and repeats that came while the key was still being worked on (told to retry).",
		Kind:  c.Query("kind")}
	if p.Kind == "" {
		p.Kind = views.ConflictKinds[0]
	}
	k, ok := conflictKinds[p.Kind]
	if !ok {
		p.Kind, p.Filter = views.ConflictKinds[0], historyFilterForm(c)
		p.Error = "kind must be conflicts, in-flight or both"
		return a.render(c, http.StatusBadRequest, views.HistoryList(p))
	}
	p.Empty = k.empty
	return a.historyList(c, p, k.kinds)
}
