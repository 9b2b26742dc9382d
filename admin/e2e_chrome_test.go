package admin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The end-to-end tests drive the console in a real headless Chromium, found through
// CHROMIUM_PATH or as chromium or chromium-browser on PATH (Debian's chromium package).
// Without one they skip, except in CI (CI or TEKRAR_E2E=1 set), where a missing browser
// is a failure: a suite that silently skips its browser tests would pass without them.

// desktopWidth and phoneWidth are the viewports the screenshots are taken at.
const (
	desktopWidth  = 1280
	desktopHeight = 800
	phoneWidth    = 390
	phoneHeight   = 844
)

// chromiumPath finds the browser; explicit is true when CHROMIUM_PATH named it.
func chromiumPath() (path string, explicit bool, err error) {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", true, fmt.Errorf("CHROMIUM_PATH=%s is not an executable: %w", p, err)
		}
		return p, true, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, false, nil
		}
	}
	return "", false, fmt.Errorf("no chromium or chromium-browser on PATH and CHROMIUM_PATH is not set")
}

// needChromium returns the browser's path. Without one it skips the test, or fails it in
// CI (CI or TEKRAR_E2E=1) or when CHROMIUM_PATH names no browser. Call it before any slow
// set-up, so that a skip is quick.
func needChromium(t *testing.T) string {
	t.Helper()
	path, explicit, err := chromiumPath()
	switch {
	case err == nil:
		return path
	case explicit || os.Getenv("CI") != "" || os.Getenv("TEKRAR_E2E") == "1":
		t.Fatalf("the end-to-end tests need Chromium: %v (apt-get install chromium, or set CHROMIUM_PATH)", err)
	default:
		t.Skipf("skipping the browser tests: %v (apt-get install chromium, or set CHROMIUM_PATH; with CI or TEKRAR_E2E=1 set this fails instead)", err)
	}
	return ""
}

// chrome is one headless Chromium tab, the console messages it saw, and where its
// screenshots go.
type chrome struct {
	t    *testing.T
	ctx  context.Context
	base string
	// shots is where every screenshot goes; docs, when not "", also gets the desktop ones.
	shots, docs string

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// newChrome starts the headless Chromium at path (see needChromium) with a fresh profile,
// for the app at base.
func newChrome(t *testing.T, path, base string) *chrome {
	t.Helper()
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(desktopWidth, desktopHeight),
		// The browser only ever loads the test's own server, and Chromium will not run as
		// root (as in CI containers) with its sandbox on.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("lang", "en-US"),
		// Times are shown in the browser's zone: UTC keeps the screenshots alike.
		chromedp.Env("TZ=UTC"),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// Cancelling waits for the browser to exit, before TempDir removes its profile.
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	c := &chrome{t: t, ctx: ctx, base: base}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(desktopWidth, desktopHeight)); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			c.mu.Lock()
			c.console = append(c.console, m)
			c.mu.Unlock()
		}
	}()
	c.shots = os.Getenv("TEKRAR_E2E_ARTIFACTS")
	if c.shots == "" {
		c.shots = filepath.Join(t.TempDir(), "screenshots")
		t.Logf("screenshots go to %s, removed after the test; set TEKRAR_E2E_ARTIFACTS to keep them", c.shots)
	} else {
		t.Logf("screenshots go to %s", c.shots)
	}
	if err := os.MkdirAll(c.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("TEKRAR_E2E_DOCS") == "1" {
		c.docs = filepath.Join("..", "docs", "screenshots") // tests run in admin/
		if err := os.MkdirAll(c.docs, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("desktop screenshots also go to docs/screenshots")
	}
	// A failed test leaves a picture of where it stopped (run before the browser stops).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		defer cancel()
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(filepath.Join(c.shots, "failed.png"), png, 0o644)
			t.Logf("the page at the failure: %s", filepath.Join(c.shots, "failed.png"))
		}
	})
	return c
}

// step runs actions, failing the test with what was being done.
func (c *chrome) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// navigate runs actions that load a page (a link followed, a form posted) and returns the
// HTTP status of the page they led to.
func (c *chrome) navigate(what string, actions ...chromedp.Action[chromedp.Void]) int64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 15*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, actions...)
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	if resp == nil {
		c.t.Fatalf("%s: no page loaded", what)
	}
	return resp.Status
}

// open loads a console path and checks it answered 200.
func (c *chrome) open(path string) {
	c.t.Helper()
	if status := c.navigate("open "+path, chromedp.Navigate(c.base+path)); status != 200 {
		c.t.Fatalf("GET %s: %d", path, status)
	}
}

// follow clicks what sel finds, a link or a submit button, and checks the page it leads to
// answered 200.
func (c *chrome) follow(sel string) {
	c.t.Helper()
	if status := c.navigate("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)); status != 200 {
		c.t.Fatalf("click %s: %d", sel, status)
	}
}

// location is the page's URL without the server, like /admin/orders?email=...
func (c *chrome) location() string {
	c.t.Helper()
	loc, err := chromedp.Run(c.ctx, chromedp.Location())
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.TrimPrefix(loc, c.base)
}

// text is the visible text of the first element sel finds.
func (c *chrome) text(sel string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 15*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		c.t.Fatalf("text of %s on %s: %v", sel, c.location(), err)
	}
	return s
}

// count is how many elements sel finds.
func (c *chrome) count(sel string) int {
	c.t.Helper()
	n, err := chromedp.Run(c.ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// shoot saves a full-page PNG of the page as name.png; desktop ones also go to docs when
// TEKRAR_E2E_DOCS=1.
func (c *chrome) shoot(name string, desktop bool) {
	c.t.Helper()
	// Fonts and the local times console.js writes settle before the picture.
	c.step("wait for "+name, chromedp.Evaluate[chromedp.Void](`document.fonts.ready`, chromedp.EvalAwaitPromise))
	png, err := chromedp.Run(c.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		c.t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{c.shots}
	if desktop && c.docs != "" {
		dirs = append(dirs, c.docs)
	}
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
}

// phone switches the viewport to a phone's, portrait, mobile and touch; desktop switches
// back.
func (c *chrome) phone() {
	c.t.Helper()
	c.step("phone viewport", chromedp.EmulateViewport(phoneWidth, phoneHeight,
		chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch))
}

func (c *chrome) desktop() {
	c.t.Helper()
	c.step("desktop viewport", chromedp.EmulateViewport(desktopWidth, desktopHeight))
}

// problems are the console messages that show something wrong in a page: errors,
// uncaught exceptions and Content-Security-Policy violations.
func (c *chrome) problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.console {
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || strings.Contains(m.Text, "Content Security Policy") {
			out = append(out, fmt.Sprintf("%s (%s)", m, m.URL))
		}
	}
	return out
}
