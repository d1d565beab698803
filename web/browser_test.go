//go:build browser

package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/internal/testsupport"
)

// The browser test drives Debian's chromium (never a downloaded browser)
// headless against a running Threadcast — embedded NATS, ingest, fanout and
// the dashboard in this process, with demo agents publishing through the
// SDK — and checks what an operator would look at. It runs in CI with
// `go test -tags browser ./web/`; THREADCAST_CHROMIUM overrides the browser
// path and THREADCAST_ARTIFACTS the directory the screenshot is saved in.

// browserDemo is the demo the test plays: one agent per tenant, at the
// scripts' own pace, twice as fast, with no failures (the test follows one
// thread through a web search).
func browserDemo(seed uint64) demo.Config {
	return demo.Config{Tenants: testTenants, Agents: len(testTenants), TimeScale: 0.5, RunsPerThread: 4, Seed: seed,
		Options: demo.Options{ErrorRate: -1, CancelRate: -1}}
}

// searchSeed finds a demo seed whose first acme thread (agent 0) runs a
// web search in its first run, by playing the demo into a recorder at full
// speed, and returns it with that thread's id. The scripts are
// deterministic, so the real run repeats it.
func searchSeed(t *testing.T) (uint64, string) {
	t.Helper()
	for seed := uint64(1); seed < 200; seed++ {
		var mu sync.Mutex
		var found, thread string
		cfg := browserDemo(seed)
		cfg.TimeScale, cfg.ThreadsPerAgent, cfg.RunsPerThread, cfg.NoTimestamps = 1e-9, 1, 1, true
		_, err := demo.Run(t.Context(), demo.PublisherFunc(func(_ context.Context, tenant, th string, ev []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if tenant == "acme" {
				thread = th
				if bytes.Contains(ev, []byte(`"activityType":"web_search"`)) {
					found = th
				}
			}
			return nil
		}), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if found != "" && found == thread {
			return seed, found
		}
	}
	t.Fatal("no seed with a web search in acme's first run")
	return 0, ""
}

func chromium(t *testing.T) string {
	if p := os.Getenv("THREADCAST_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		testsupport.Require(t, "BROWSER", "chromium is not installed (Debian package chromium; .ci/run installs it)")
	}
	return p
}

func TestDashboardInBrowser(t *testing.T) {
	browser := chromium(t)
	seed, thread := searchSeed(t)
	// Streams end every few seconds, as behind a proxy with a short idle
	// timeout: the page must resume each time with no gap.
	tc := startThreadcast(t, func(c *fanout.Config) { c.MaxLifetime, c.Retry = 3*time.Second, 100*time.Millisecond })

	ctx := startBrowser(t, browser)
	// Every uncaught exception in the page fails the test.
	var exMu sync.Mutex
	var exceptions []string
	thrown := chromedp.Events(ctx, runtime.ExceptionThrown)
	go func() {
		for ev, err := range thrown {
			if err != nil {
				return
			}
			exMu.Lock()
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += " " + d.Exception.Description
			}
			exceptions = append(exceptions, fmt.Sprintf("%s:%d: %s", d.URL, d.LineNumber+1, msg))
			exMu.Unlock()
		}
	}()

	run := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, a); err != nil {
			shot(t, ctx, "failure")
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll := func(what, expr string, timeout time.Duration) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
			shot(t, ctx, "failure")
			t.Fatalf("%s: %v", what, err)
		}
	}

	// Open the thread before its agent starts: the page follows it from its
	// first event, so it sees the web search of the first run happen.
	run("open the dashboard", chromedp.Navigate(tc.URL+"/#tenant=acme&thread="+url.QueryEscape(thread)))
	poll("the thread's stream connected", `document.getElementById('fig-conn').classList.contains('live')`, 30*time.Second)
	tc.playDemo(t, browserDemo(seed))
	poll("the thread in the live list", `document.querySelector('#thread-list li[data-thread].selected')`, 30*time.Second)
	poll("the thread streams", `document.querySelectorAll('#messages article').length >= 2`, 30*time.Second)
	poll("frames per second shown", `Number(document.getElementById('fig-fps').textContent) > 0`, 30*time.Second)

	// The web search widget: caught while searching, then the same element
	// fills in with results and turns done.
	poll("a web_search widget in progress", `(() => {
		const w = document.querySelector('#messages article.role-activity .widget.search[data-status="searching"]');
		if (!w) return false;
		const art = w.closest('article');
		art.setAttribute('data-probe', 'search');
		window.__searchArticle = art;
		window.__searchResults = Number(w.dataset.results);
		return true;
	})()`, 60*time.Second)
	poll("the same widget updates in place", `(() => {
		const art = window.__searchArticle;
		if (!art || !document.contains(art)) return false;
		const w = art.querySelector('.widget.search');
		return w && w.dataset.status === 'done' && Number(w.dataset.results) > window.__searchResults && w.querySelectorAll('ol.results li').length === Number(w.dataset.results);
	})()`, 60*time.Second)

	// A streamed answer grows in place: the same element's text gets longer.
	poll("streamed text grows in place", `(() => {
		const all = document.querySelectorAll('#messages article.role-assistant .content');
		const el = all[all.length - 1];
		if (!el) return false;
		if (window.__probeEl !== el) { window.__probeEl = el; window.__probeLen = el.textContent.length; return false; }
		return el.textContent.length > window.__probeLen;
	})()`, 60*time.Second)

	// The stream was cut (MaxLifetime) and the browser resumed it with
	// Last-Event-ID: no second whole view was needed, and it still streams.
	poll("resumed after a dropped connection", `(() => {
		const [resumes, views] = document.getElementById('fig-resume').textContent.split('/').map(Number);
		return resumes >= 1 && views === 1;
	})()`, 30*time.Second)
	poll("text still grows after resuming", `(() => {
		const all = document.querySelectorAll('#messages article.role-assistant .content');
		const el = all[all.length - 1];
		if (!el) return false;
		if (window.__probeEl2 !== el) { window.__probeEl2 = el; window.__probeLen2 = el.textContent.length; return false; }
		return el.textContent.length > window.__probeLen2;
	})()`, 60*time.Second)

	// Reasoning is folded, the state tree shows the plan, runs are listed,
	// the figures move, and nothing from the thread became markup.
	poll("reasoning collapsed", `[...document.querySelectorAll('#messages details.reasoning')].some(d => !d.open)`, 30*time.Second)
	poll("state tree with the plan", `[...document.querySelectorAll('#state .k')].some(k => k.textContent.startsWith('plan'))`, 30*time.Second)
	poll("runs listed", `document.querySelector('#runs li[data-run] .pill')`, 30*time.Second)
	poll("frames per second shown", `Number(document.getElementById('fig-fps').textContent) > 0`, 30*time.Second)
	poll("no markup from data", `document.querySelectorAll('#messages script, #messages iframe, #messages img, #messages b, #messages strong').length === 0 || null`, time.Second)

	// Switching tenant shows that tenant's threads only.
	run("pick globex", chromedp.SetValue(`#tenant`, "globex"))
	run("notify", chromedp.Evaluate[chromedp.Void](`document.getElementById('tenant').dispatchEvent(new Event('change'))`))
	poll("globex's threads", `(() => {
		const rows = [...document.querySelectorAll('#thread-list li[data-thread]')];
		return rows.length > 0 && rows.every(r => r.dataset.thread.startsWith('research-'));
	})()`, 30*time.Second)
	// Rows are redrawn every second, so click through the page (a node
	// picked by the driver may be gone by the time it clicks).
	run("open a globex thread", chromedp.Evaluate[chromedp.Void](`document.querySelector('#thread-list li[data-thread]').click()`))
	poll("globex thread streams", `document.querySelectorAll('#messages article').length >= 2`, 30*time.Second)
	run("back to acme", chromedp.Navigate(tc.URL+"/#tenant=acme"))
	run("reload", chromedp.Reload())
	poll("acme again", `document.querySelector('#thread-list li[data-thread^="travel-"]')`, 30*time.Second)
	run("reopen the thread", chromedp.Evaluate[chromedp.Void](`document.querySelector('#thread-list li[data-thread="`+thread+`"]').click()`))
	poll("widgets drawn", `document.querySelector('#messages .widget')`, 60*time.Second)

	// A hot thread: one agent at 400 events/s. The page keeps up: frames
	// keep arriving, a draw stays well under a 60 Hz frame, and it never
	// needs a second whole view.
	tc.playDemo(t, demo.Config{Tenants: []string{"initech"}, Agents: 1, Rate: 400, RunsPerThread: 100, Seed: seed + 1000,
		Options: demo.Options{ErrorRate: -1, CancelRate: -1}})
	run("pick initech", chromedp.SetValue(`#tenant`, "initech"))
	run("notify", chromedp.Evaluate[chromedp.Void](`document.getElementById('tenant').dispatchEvent(new Event('change'))`))
	// The hot thread is initech's thread not played by the first demo (whose
	// thread ids share the acme thread's run tag).
	tag := "-" + strings.Split(thread, "-")[1] + "-"
	hot := `#thread-list li[data-thread]:not([data-thread*="` + tag + `"])`
	poll("the hot thread listed", `document.querySelector('`+hot+`')`, 30*time.Second)
	run("open the hot thread", chromedp.Evaluate[chromedp.Void](`document.querySelector('`+hot+`').click()`))
	poll("hot thread streaming fast", `Number(document.getElementById('fig-fps').textContent) >= 20`, 30*time.Second)
	time.Sleep(5 * time.Second) // let it stream; the figures below are averages over this time
	poll("hot thread drawn smoothly", `(() => {
		const ms = parseFloat(document.getElementById('fig-render').textContent);
		const [, views] = document.getElementById('fig-resume').textContent.split('/').map(Number);
		return ms < 16 && views === 1 && Number(document.getElementById('fig-fps').textContent) >= 20;
	})()`, 5*time.Second)
	// Model output that looks like markup is shown as text: the devops
	// agent's answers quote <b>this</b>.
	poll("markup-like text shown literally", `[...document.querySelectorAll('#messages .content')].some(c => c.textContent.includes('<b>this</b>')) &&
		document.querySelectorAll('#messages b, #messages script').length === 0`, 40*time.Second)
	poll("checklist and unknown activity widgets", `document.querySelector('#messages .widget.checklist[data-done] ul.checklist li') &&
		document.querySelector('#messages .widget.generic pre')`, 40*time.Second)
	shot(t, ctx, "hot-thread")

	poll("server figures", `document.getElementById('fig-ingest').textContent !== '–' && document.getElementById('fig-lat').textContent !== '–'`, 30*time.Second)
	path := shot(t, ctx, "dashboard")

	// A token the server refuses is reported, not retried forever.
	forged := "x." + base64.RawURLEncoding.EncodeToString([]byte(`{"tenant":"acme","exp":9999999999}`)) + ".x"
	run("open with a forged token", chromedp.Navigate(tc.URL+"/#token="+forged+"&thread="+url.QueryEscape(thread)))
	run("reload", chromedp.Reload())
	poll("refusal shown", `document.getElementById('fig-conn').textContent.includes('denied') &&
		document.getElementById('thread-error').textContent.includes('refused')`, 30*time.Second)
	t.Logf("screenshot: %s", path)
	exMu.Lock()
	defer exMu.Unlock()
	if len(exceptions) > 0 {
		t.Errorf("uncaught exceptions in the page:\n%s", strings.Join(exceptions, "\n"))
	}
}

// startBrowser starts chromium headless for the test and returns its
// context, bounded to two minutes; everything stops at the end of the test.
func startBrowser(t *testing.T, browser string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 120*time.Second)
	t.Cleanup(cancelT)
	// Start the browser here: Events must not be the call that starts it
	// while another call does the same.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", browser, err)
	}
	return ctx
}

// shot saves a screenshot of the page as a test artifact and returns its path.
func shot(t *testing.T, ctx context.Context, name string) string {
	dir := os.Getenv("THREADCAST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "threadcast-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("artifacts: %v", err)
		return ""
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return ""
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.png", t.Name(), name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("screenshot: %v", err)
	}
	return path
}
