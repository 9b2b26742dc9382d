package admin_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// axeSource is axe-core (testdata/axe, vendored from npm with its licence), the
// accessibility checker the browser tests run on a page.
//
//go:embed testdata/axe/axe.min.js
var axeSource string

// axe runs axe-core on the page as it is and returns its violations, one line each: the
// rule, its impact and the first elements it names. Only the violations are gathered in
// full (resultTypes): the rules that passed still count, with one element each, which
// keeps a walk of every page quick.
func (c *chrome) axe() []string {
	c.t.Helper()
	c.step("load axe", chromedp.Evaluate[chromedp.Void](axeSource))
	ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify({passes: r.passes.length,
		violations: r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}))}))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		c.t.Fatalf("axe on %s: %v", c.location(), err)
	}
	var res struct {
		Passes     int
		Violations []struct {
			ID, Impact string
			Nodes      []string
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		c.t.Fatalf("axe's answer %q: %v", out, err)
	}
	if res.Passes == 0 {
		c.t.Fatalf("axe on %s checked nothing: %s", c.location(), out)
	}
	c.t.Logf("axe on %s: %d rules passed, %d violated", c.location(), res.Passes, len(res.Violations))
	var lines []string
	for _, v := range res.Violations {
		lines = append(lines, fmt.Sprintf("%s (%s): %s", v.ID, v.Impact, strings.Join(v.Nodes, ", ")))
	}
	return lines
}
