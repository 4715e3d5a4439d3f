package console_test

// The browser the console's browser tests drive: a tab of headless Chromium under chromedp, the
// steps a person takes in it, and what its console said while they did.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// screenshotsEnv names the directory the browser test saves its screenshots of the main pages
// in, when set (docs/console holds the ones docs/console.md shows).
const screenshotsEnv = "JOBBILL_CONSOLE_SCREENSHOTS"

// tab is one browser tab on the console, and what its console said.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
	axe  string

	mu sync.Mutex
	// problems are the console's errors and the page's uncaught exceptions, in order.
	problems []string
	// csp is the Content-Security-Policy header of the last page the tab loaded.
	csp string
}

// newPhoneTab is newTab on a phone's screen: 390 CSS pixels wide, portrait, as a mobile browser
// lays pages out.
func newPhoneTab(t *testing.T, base string) *tab {
	t.Helper()
	b := newTab(t, base)
	b.do(chromedp.EmulateViewport(phoneWidth, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile))
	return b
}

// phoneWidth is the width of a common phone's screen, in CSS pixels.
const phoneWidth = 390

// newTab starts headless Chromium with one tab, listening to its console.
func newTab(t *testing.T, base string) *tab {
	t.Helper()
	path, err := exec.LookPath("chromium")
	require.NoError(t, err, "Chromium is not installed: run scripts/ensure-chromium.sh (make test does)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	b := &tab{t: t, ctx: ctx, base: base, axe: axeSource(t)}
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.problems = append(b.problems, "exception: "+ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				b.problems = append(b.problems, "console.error")
			}
		case *network.EventResponseReceived:
			if ev.Type == network.ResourceTypeDocument {
				b.csp, _ = ev.Response.Headers["Content-Security-Policy"].(string)
			}
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				b.problems = append(b.problems, fmt.Sprintf("%s (%s)", ev.Entry.Text, ev.Entry.URL))
			}
		}
	}))
	return b
}

// axeSource is axe-core's script, installed from testdata/axe's lockfile.
func axeSource(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("testdata", "axe")
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm ci in %s:\n%s", dir, out)
	src, err := os.ReadFile(filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
	require.NoError(t, err)
	return string(src)
}

// stepLimit bounds one step in the browser: generous, since a machine running the whole suite
// (and axe-core's walk of a page) can stall a step for a minute.
const stepLimit = 3 * time.Minute

// do runs the steps, each bounded by a generous deadline.
func (b *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepLimit)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...))
}

// eval evaluates a script (awaiting a promise it returns) and decodes its value.
func eval[T any](b *tab, script string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepLimit)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](script, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err, script)
	return v
}

// open navigates to a console path and waits for its page.
func (b *tab) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+path), chromedp.WaitReady(chromedp.CSS("main")))
}

// submit clicks a form's button and waits until the browser has left the page for the answer's.
func (b *tab) submit(button string) {
	b.t.Helper()
	marker := fmt.Sprintf("m%d", time.Now().UnixNano())
	eval[bool](b, `document.documentElement.dataset.left = "`+marker+`", true`)
	b.do(chromedp.Click(chromedp.CSS(button)))
	b.waitFor(`document.readyState === "complete" && document.documentElement.dataset.left !== "`+marker+`" && !!document.querySelector("main")`,
		"the form's answer to load")
}

// waitFor waits, up to a minute, until the script is true on the page.
func (b *tab) waitFor(script, what string) {
	b.t.Helper()
	deadline := time.Now().Add(stepLimit)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](script))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pageCSP is the Content-Security-Policy header the page was served with.
func (b *tab) pageCSP() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.csp
}

// download clicks a button that downloads a file, waits for the download to complete, and
// answers the file.
func (b *tab) download(button string) string {
	b.t.Helper()
	dir := b.t.TempDir()
	ctx, cancel := context.WithTimeout(b.ctx, stepLimit)
	defer cancel()
	progress := chromedp.Events(ctx, cdpbrowser.DownloadProgress)
	_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: new(true)})
	require.NoError(b.t, err)
	b.do(chromedp.Click(chromedp.CSS(button)))
	for ev, err := range progress {
		require.NoError(b.t, err, "waiting for the download")
		if ev.State == cdpbrowser.DownloadProgressStateCompleted {
			body, err := os.ReadFile(filepath.Join(dir, ev.GUID))
			require.NoError(b.t, err)
			return string(body)
		}
		require.NotEqual(b.t, cdpbrowser.DownloadProgressStateCanceled, ev.State, "the download was cancelled")
	}
	b.t.Fatal("the download never completed")
	return ""
}

// text is the text of the first element the selector finds.
func (b *tab) text(sel string) string {
	b.t.Helper()
	return eval[string](b, `document.querySelector(`+strconv.Quote(sel)+`).innerText`)
}

// accessible injects axe-core into the page and fails the test on any serious or critical
// violation.
func (b *tab) accessible(name string) {
	b.t.Helper()
	eval[bool](b, b.axe+"\n;true")
	violations := eval[[]string](b, `axe.run(document).then(r => r.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(v => v.impact + " " + v.id + ": " + v.help + " (" + v.nodes.map(n => n.target.join(" ")).join(", ") + ")"))`)
	require.Empty(b.t, violations, "accessibility of the %s page", name)
}

// screenshot saves what the window shows of the page (1280×900) as a PNG, when the screenshots
// directory is set: the top of a long list is what a reader of the docs needs.
func (b *tab) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, stepLimit)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(b.t, err)
	require.NoError(b.t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// noProblems fails the test if the console reported an error or an exception, other than those
// of the answers expected (a not-found page answers 404, a refused form 403).
func (b *tab) noProblems(expected ...string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var left []string
	for _, p := range b.problems {
		ok := false
		for _, e := range expected {
			ok = ok || strings.Contains(p, e)
		}
		if !ok {
			left = append(left, p)
		}
	}
	require.Empty(b.t, left, "the browser's console reported errors")
	b.problems = nil
}

// signIn pastes the key into the sign-in form.
func (b *tab) signIn(secret string) {
	b.t.Helper()
	b.open("/console/sign-in")
	b.do(chromedp.SendKeys(chromedp.CSS("#key"), secret))
	b.submit("form[action='/console/sign-in'] button")
}
