//go:build browser

package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/internal/longthread"
	"github.com/threadcast/threadcast/internal/testsupport"
)

// The tests in this file use the dashboard as a person does: the pointer
// moves, presses and releases (Input.dispatchMouseEvent, never a click from
// JavaScript), the wheel scrolls, the window is narrow or wide, the tab is
// reloaded.

// page drives one browser tab for a test.
type page struct {
	t   *testing.T
	ctx context.Context
}

func newPage(t *testing.T) *page {
	return &page{t: t, ctx: startBrowser(t, chromium(t))}
}

func (p *page) run(what string, a chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, a); err != nil {
		shot(p.t, p.ctx, "failure")
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p *page) poll(what, expr string, timeout time.Duration) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		shot(p.t, p.ctx, "failure")
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p *page) eval(expr string, out any) {
	p.t.Helper()
	res, err := chromedp.Run(p.ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if err := json.Unmarshal(res, out); err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
}

func (p *page) mouse(typ input.DispatchMouseEventType, x, y float64) {
	p.t.Helper()
	opts := []chromedp.MouseOption{chromedp.ButtonNone}
	if typ != chromedp.MouseMoved {
		opts = []chromedp.MouseOption{chromedp.ButtonLeft, chromedp.ClickCount(1)}
	}
	p.run(string(typ), chromedp.MouseEvent(typ, x, y, opts...))
}

// press is a person's click at (x, y): the pointer moves there, the button
// goes down, stays down 80 ms, and comes up where the pointer is.
func (p *page) press(x, y float64) {
	p.t.Helper()
	p.mouse(chromedp.MouseMoved, x, y)
	p.mouse(chromedp.MousePressed, x, y)
	time.Sleep(80 * time.Millisecond) // the time a finger holds the button
	p.mouse(chromedp.MouseReleased, x, y)
}

// wheel turns the mouse wheel by dy pixels with the pointer at (x, y).
func (p *page) wheel(x, y, dy float64) {
	p.t.Helper()
	// Input.dispatchMouseEvent by hand: the typed parameters omit a zero
	// deltaX, which a mouseWheel event must carry.
	cmd := cdp.Command[map[string]any, cdp.Empty]{Method: input.CommandDispatchMouseEvent}
	if _, err := chromedp.Call(p.ctx, cmd, map[string]any{"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": dy}); err != nil {
		p.t.Fatalf("wheel: %v", err)
	}
}

// rect is an element's box in the viewport.
type rect struct{ X, Y, W, H float64 }

func (r rect) cx() float64 { return r.X + r.W/2 }
func (r rect) cy() float64 { return r.Y + r.H/2 }

const rectOf = `(el => { const r = el.getBoundingClientRect(); return {X: r.x, Y: r.y, W: r.width, H: r.height}; })`

// TestDashboardClicksLikeAPersonInBrowser clicks rows of the thread list as
// a person does while the demo streams at full pace — the list changes
// many times a second — and checks that every click opens the thread that
// was under the pointer.
func TestDashboardClicksLikeAPersonInBrowser(t *testing.T) {
	tc := startThreadcast(t)
	p := newPage(t)
	tc.playDemo(t, demo.Config{Tenants: []string{"acme"}, Agents: 8, TimeScale: 0.25, RunsPerThread: 1, Seed: 77,
		Options: demo.Options{ErrorRate: -1, CancelRate: -1}})

	// How often the list changes while the clicks happen, counted on the
	// live list stream the page reads.
	var updates atomic.Int64
	sctx, stopCount := context.WithCancel(t.Context())
	live := tc.sse(t, sctx, "acme", "/v1/threads?live=1")
	var wg sync.WaitGroup
	wg.Go(func() {
		for range live {
			updates.Add(1)
		}
	})
	t.Cleanup(func() { stopCount(); wg.Wait() })

	p.run("open the dashboard", chromedp.Navigate(tc.URL+"/#tenant=acme"))
	p.poll("rows listed", `document.querySelectorAll('#thread-list li[data-thread]').length >= 8`, 60*time.Second)
	var list, msgs rect
	p.eval(rectOf+`(document.getElementById('thread-scroll'))`, &list)
	p.eval(rectOf+`(document.getElementById('messages'))`, &msgs)
	// Which row was under the pointer at the press and at the release.
	p.run("watch presses", chromedp.Evaluate[chromedp.Void](`(() => {
		const row = e => e.target.closest && e.target.closest('li[data-thread]');
		document.addEventListener('pointerdown', e => { window.__down = row(e); }, true);
		document.addEventListener('pointerup', e => { window.__up = row(e); }, true);
	})()`))

	start, n0 := time.Now(), updates.Load()
	const clicks = 20
	var failed []string
	for i := range clicks {
		// The pointer comes from the messages, where it rested while the
		// list went on changing, and enters the list.
		p.mouse(chromedp.MouseMoved, msgs.cx(), msgs.cy())
		time.Sleep(300 * time.Millisecond) // the list re-sorts meanwhile
		p.mouse(chromedp.MouseMoved, list.cx(), list.Y+10)
		// The person looks for a row (a different one each time), moves to
		// its centre, and clicks.
		var target struct {
			ID string
			R  rect
		}
		p.eval(`(() => {
			const box = document.getElementById('thread-scroll').getBoundingClientRect();
			const rows = [...document.querySelectorAll('#thread-list li[data-thread]')]
				.filter(li => { const r = li.getBoundingClientRect(); return r.top >= box.top && r.bottom <= box.bottom; })
				.sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top);
			const li = rows[`+strconv.Itoa(i)+` % rows.length];
			return {ID: li.dataset.thread, R: `+rectOf+`(li)};
		})()`, &target)
		p.press(target.R.cx(), target.R.cy())
		_, err := chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](`document.getElementById('thread-title').textContent === `+strconv.Quote(target.ID)+` &&
			new URLSearchParams(location.hash.slice(1)).get('thread') === `+strconv.Quote(target.ID)+` &&
			document.querySelector('#thread-list li.selected')?.dataset.thread === `+strconv.Quote(target.ID),
			chromedp.WithPollingTimeout(3*time.Second), chromedp.WithPollingInterval(20*time.Millisecond)))
		if err != nil {
			var got struct{ Title, Down, Up string }
			p.eval(`({Title: document.getElementById('thread-title').textContent, Down: window.__down?.dataset.thread ?? '', Up: window.__up?.dataset.thread ?? ''})`, &got)
			failed = append(failed, fmt.Sprintf("click %d on %s: detail shows %q (pressed on %q, released on %q)", i+1, target.ID, got.Title, got.Down, got.Up))
			shot(t, p.ctx, fmt.Sprintf("click-%d", i+1))
			continue
		}
		// The thread's stream is open and its messages come in.
		p.poll("the clicked thread streams", `document.getElementById('fig-conn').classList.contains('live')`, 10*time.Second)
	}
	rate := float64(updates.Load()-n0) / time.Since(start).Seconds()
	t.Logf("%d of %d clicks opened the thread under the pointer; the list changed %.0f times/s meanwhile", clicks-len(failed), clicks, rate)
	if len(failed) > 0 {
		t.Errorf("%d of %d clicks did not open the thread:\n%s", len(failed), clicks, strings.Join(failed, "\n"))
	}
	if rate < 20 {
		t.Errorf("the list changed %.0f times/s during the clicks: not the demo at full pace (want >= 20)", rate)
	}

	// Rows are updated in place: the element of a thread's row stays the
	// same while its status and time change.
	p.mouse(chromedp.MouseMoved, msgs.cx(), msgs.cy())
	p.run("mark rows", chromedp.Evaluate[chromedp.Void](`window.__rows = new Map([...document.querySelectorAll('#thread-list li[data-thread]')].slice(0, 12).map(li => [li.dataset.thread, li]))`))
	time.Sleep(2 * time.Second) // the demo goes on; rows change and move
	var replaced []string
	p.eval(`[...window.__rows].filter(([id, li]) => { const now = document.querySelector('#thread-list li[data-thread="' + id + '"]'); return now && now !== li; }).map(([id]) => id)`, &replaced)
	if len(replaced) > 0 {
		t.Errorf("rows rebuilt instead of updated in place: %v", replaced)
	}
}

// TestDashboardFirstLoadInBrowser opens the dashboard on finished threads:
// every row shows the status GET /v1/threads gives; the layout works from
// 360 px to wide screens; and a tab opened with #token= keeps the token
// (out of the address) across a reload.
func TestDashboardFirstLoadInBrowser(t *testing.T) {
	tc := startThreadcast(t)
	stop, done := tc.playDemo(t, demo.Config{Tenants: []string{"acme", "globex"}, Agents: 6, TimeScale: 0.001, ThreadsPerAgent: 2, Seed: 11})
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the demo did not finish in a minute")
	}
	stop()
	type listing struct {
		Threads []struct {
			Thread, Status string
			Seq            uint64
		}
	}
	// The listing is as of each thread's last checkpoint: wait until every
	// one is the thread's current view.
	var want listing
	testsupport.WaitFor(t, 30*time.Second, "listing up to date", func() bool {
		want = listing{}
		if tc.get(t, "acme", "/v1/threads", &want) != 200 || len(want.Threads) != 6 {
			return false
		}
		for _, th := range want.Threads {
			var v struct{ Seq uint64 }
			if th.Status == "" || tc.get(t, "acme", threadPath(th.Thread), &v) != 200 || v.Seq != th.Seq {
				return false
			}
		}
		return true
	})
	wantStatus := map[string]string{}
	for _, th := range want.Threads {
		wantStatus[th.Thread] = th.Status
	}

	p := newPage(t)
	p.run("open the dashboard", chromedp.Navigate(tc.URL+"/#tenant=acme"))
	p.poll("every thread listed", `document.querySelectorAll('#thread-list li[data-thread]').length === 6`, 30*time.Second)
	var got map[string]string
	p.eval(`Object.fromEntries([...document.querySelectorAll('#thread-list li[data-thread]')].map(li => [li.dataset.thread, li.querySelector('.pill').textContent]))`, &got)
	for id, st := range wantStatus {
		if got[id] != st {
			t.Errorf("thread %s: the list shows status %q, GET /v1/threads %q", id, got[id], st)
		}
	}

	// Layout, from a phone to a wide screen (the same tab, resized):
	// nothing wider than the window, the parts side by side where there is
	// room, the list or the open thread where not.
	thread := want.Threads[0].Thread
	type layout struct {
		Overflow   bool
		List, Msgs rect
		Back       bool
	}
	measure := func() layout {
		var lay layout
		p.eval(`(() => {
			const vis = id => { const r = document.getElementById(id).getBoundingClientRect(); return {X: r.x, Y: r.y, W: r.width, H: r.height}; };
			return {Overflow: document.documentElement.scrollWidth > innerWidth, List: vis('thread-scroll'), Msgs: vis('messages'),
				Back: document.getElementById('back').getBoundingClientRect().width > 0};
		})()`, &lay)
		return lay
	}
	pressOn := func(sel string) {
		t.Helper()
		var r rect
		p.eval(rectOf+`(document.querySelector(`+strconv.Quote(sel)+`))`, &r)
		p.press(r.cx(), r.cy())
	}
	for _, w := range []int64{360, 390, 768, 1024, 1440} {
		p.run("resize", chromedp.EmulateViewport(w, 800))
		narrow := w < 760
		if narrow && measure().Back {
			pressOn("#back")
			p.poll("back at the list", `document.getElementById('thread-scroll').getBoundingClientRect().width > 300 && !new URLSearchParams(location.hash.slice(1)).has('thread')`, 10*time.Second)
		}
		lay := measure()
		if lay.Overflow {
			t.Errorf("%d px: the page is wider than the window", w)
		}
		if lay.List.W < 200 || lay.List.H < 200 {
			t.Errorf("%d px: the thread list is %vx%v px", w, lay.List.W, lay.List.H)
		}
		if narrow && (lay.Msgs.W != 0 || lay.List.W < float64(w)-20) {
			t.Errorf("%d px: the list does not have the screen to itself (list %v, messages %v)", w, lay.List, lay.Msgs)
		}
		if !narrow && (lay.Msgs.W < 300 || lay.Msgs.X < lay.List.X+lay.List.W-1) {
			t.Errorf("%d px: list and thread not side by side (list %v, messages %v)", w, lay.List, lay.Msgs)
		}
		if w == 390 {
			shot(t, p.ctx, "390px-list")
		}
		// Open a thread with the pointer.
		pressOn(`#thread-list li[data-thread="` + thread + `"]`)
		p.poll("thread open", `document.getElementById('thread-title').textContent === `+strconv.Quote(thread)+` && document.querySelectorAll('#messages article').length > 0`, 30*time.Second)
		lay = measure()
		if lay.Overflow {
			t.Errorf("%d px, thread open: the page is wider than the window", w)
		}
		if lay.Msgs.W < float64(w)/3 || lay.Msgs.H < 200 {
			t.Errorf("%d px: the messages get %vx%v px", w, lay.Msgs.W, lay.Msgs.H)
		}
		if narrow != lay.Back || narrow && lay.List.W != 0 {
			t.Errorf("%d px, thread open: back control shown %v, list %v", w, lay.Back, lay.List)
		}
		if w == 390 {
			shot(t, p.ctx, "390px-thread")
		}
	}

	// A tab opened with a token in its address, on a dashboard that offers
	// none: the token leaves the address at once and survives a reload.
	var theirs listing
	if tc.get(t, "globex", "/v1/threads", &theirs) != 200 || len(theirs.Threads) == 0 {
		t.Fatal("no globex threads listed")
	}
	thread = theirs.Threads[0].Thread
	p.run("open with a token", chromedp.Navigate(tc.URL+"/plain/#token="+tc.tokens["globex"]+"&thread="+url.QueryEscape(thread)))
	p.poll("globex listed", `document.querySelectorAll('#thread-list li[data-thread]').length === 6 && document.getElementById('tenant').value === 'globex'`, 30*time.Second)
	var addr string
	p.eval(`location.href`, &addr)
	if strings.Contains(addr, "token") || !strings.Contains(addr, "thread=") {
		t.Errorf("address after opening: %s (want the thread, not the token)", addr)
	}
	p.run("reload", chromedp.Reload())
	p.poll("globex listed after the reload", `document.querySelectorAll('#thread-list li[data-thread]').length === 6 && document.getElementById('tenant').value === 'globex'`, 30*time.Second)
	p.poll("the thread open after the reload", `document.getElementById('thread-title').textContent === `+strconv.Quote(thread)+` &&
		document.getElementById('fig-conn').classList.contains('live') && document.querySelectorAll('#messages article').length > 0`, 30*time.Second)
}

// TestDashboardLongListInBrowser lists 10,000 threads — the DOM holds only
// the rows in view, scrolling keeps its place while threads change order,
// and the wheel reaches the end — and opens a long finished thread at its
// newest message.
func TestDashboardLongListInBrowser(t *testing.T) {
	tc := startThreadcast(t)
	js, err := jetstream.New(tc.nc)
	if err != nil {
		t.Fatal(err)
	}
	// One message per thread, a whole run in it, published without waiting
	// for each ack.
	const threads = 10000
	publish := func(tenant, thread string, evs []json.RawMessage) jetstream.PubAckFuture {
		t.Helper()
		f, err := js.PublishMsgAsync(batchMsg(t, tenant, thread, evs))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	acked := func() {
		t.Helper()
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(60 * time.Second):
			t.Fatal("publishes not acknowledged in a minute")
		}
	}
	bulk := func(i int) string { return fmt.Sprintf("bulk-%05d", i) }
	for i := range threads {
		g := &longthread.Gen{Thread: bulk(i), RunLen: 1}
		publish("acme", bulk(i), g.Messages(1))
		if i%1000 == 999 {
			acked() // at most a thousand in flight
		}
	}
	// The long finished thread: 400 messages of very different heights.
	const long = "long-finished"
	g := &longthread.Gen{Thread: long, RunLen: 40, Body: 900}
	evs := append(g.Messages(400), g.Finish()...)
	for i := 0; i < len(evs); i += 200 {
		publish("globex", long, evs[i:min(i+200, len(evs))])
	}
	acked()
	type entry struct {
		Thread, Status string
		Updated        time.Time
		LastEvent      *time.Time
	}
	var listing struct{ Threads []entry }
	testsupport.WaitFor(t, 120*time.Second, "10,000 threads listed", func() bool {
		return tc.get(t, "acme", "/v1/threads?limit=10000", &listing) == 200 && len(listing.Threads) == threads
	})
	var rest struct {
		View struct{ Messages []struct{ ID string } }
	}
	testsupport.WaitFor(t, 30*time.Second, "the long thread reduced", func() bool {
		return tc.get(t, "globex", threadPath(long), &rest) == 200 && len(rest.View.Messages) == g.Count()
	})
	lastID := rest.View.Messages[len(rest.View.Messages)-1].ID

	p := newPage(t)
	p.run("open the dashboard", chromedp.Navigate(tc.URL+"/#tenant=acme"))
	p.poll("10,000 threads counted", `document.getElementById('thread-count').textContent === '10000'`, 60*time.Second)
	p.poll("rows drawn", `document.querySelectorAll('#thread-list li[data-thread]').length > 10`, 10*time.Second)
	var rows int
	p.eval(`document.querySelectorAll('#thread-list li').length`, &rows)
	if rows > 80 {
		t.Errorf("%d rows in the DOM for a list of 10,000 (want only those in view)", rows)
	}
	var statuses int
	p.eval(`[...document.querySelectorAll('#thread-list li .pill')].filter(p => p.textContent === 'finished').length`, &statuses)
	if statuses != rows {
		t.Errorf("%d of %d rows show the status (finished) the listing gives", statuses, rows)
	}

	var list rect
	p.eval(rectOf+`(document.getElementById('thread-scroll'))`, &list)
	wheel := func(dy float64) { p.wheel(list.cx(), list.cy(), dy) }
	// Frames while the list scrolls: the longest gap between two.
	p.run("watch frames", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__gaps = [];
		let prev = performance.now();
		const f = now => { window.__gaps.push(now - prev); prev = now; window.__raf = requestAnimationFrame(f); };
		window.__raf = requestAnimationFrame(f);
		window.__lt = [];
		new PerformanceObserver(l => { for (const e of l.getEntries()) window.__lt.push(e.duration.toFixed(0)); }).observe({type: 'longtask'});
	})()`))
	time.Sleep(time.Second) // frames of the idle page, for comparison
	p.run("mark", chromedp.Evaluate[chromedp.Void](`window.__idle = window.__gaps.length`))
	// Down to the middle of the list.
	for range 50 {
		wheel(3400)
		time.Sleep(16 * time.Millisecond) // a wheel turning at a frame's pace
	}
	p.poll("scrolled", `document.getElementById('thread-scroll').scrollTop > 100000`, 10*time.Second)
	type top struct {
		ID  string
		Pos int
		Y   float64
	}
	firstRow := `(() => {
		const box = document.getElementById('thread-scroll').getBoundingClientRect();
		const li = document.elementFromPoint(box.x + 40, box.y + 5).closest('li[data-thread]');
		return {ID: li.dataset.thread, Pos: Number(li.getAttribute('aria-posinset')), Y: li.getBoundingClientRect().y};
	})()`
	// Threads listed below change: they move to the top of the list, and
	// what is in view stays in view. The pointer leaves the list first (the
	// order holds while it is over it).
	p.mouse(chromedp.MouseMoved, list.cx()+list.W, list.cy())
	var before top
	p.eval(firstRow, &before)
	var acks []jetstream.PubAckFuture
	for i := range 20 { // the first published: the least recent
		g := &longthread.Gen{Thread: bulk(i), RunLen: 1}
		g.Messages(1) // the run the thread has
		acks = append(acks, publish("acme", bulk(i), g.Messages(1)))
	}
	for _, a := range acks {
		select {
		case <-a.Ok():
		case err := <-a.Err():
			t.Fatal(err)
		}
	}
	var after top
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.eval(firstRow, &after)
		if after.Pos != before.Pos || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling for the re-sort
	}
	if after.ID != before.ID || after.Y != before.Y || after.Pos <= before.Pos {
		t.Errorf("first row in view before threads changed %+v, after %+v (want the same row, moved down the list)", before, after)
	}

	// On to the end.
	for range 200 {
		var end bool
		p.eval(`(() => { const s = document.getElementById('thread-scroll'); return s.scrollTop + s.clientHeight >= s.scrollHeight - 1; })()`, &end)
		if end {
			break
		}
		wheel(3400)
		time.Sleep(16 * time.Millisecond)
	}
	p.poll("the last row in view", `(() => {
		const box = document.getElementById('thread-scroll').getBoundingClientRect();
		const li = document.querySelector('#thread-list li[aria-posinset="10000"]');
		if (!li) return false;
		const r = li.getBoundingClientRect();
		return r.top >= box.top && r.bottom <= box.bottom + 1;
	})()`, 5*time.Second)
	var frames struct {
		N, IdleN          int
		Max, P95, IdleP95 float64
	}
	p.eval(`(() => { cancelAnimationFrame(window.__raf);
		const idle = window.__gaps.slice(1, window.__idle).sort((a, b) => a - b);
		const g = window.__gaps.slice(window.__idle).sort((a, b) => a - b);
		return {N: g.length, Max: g[g.length - 1], P95: g[Math.floor(g.length * 0.95)], IdleN: idle.length, IdleP95: idle[Math.floor(idle.length * 0.95)]}; })()`, &frames)
	var lt []string
	p.eval(`window.__lt`, &lt)
	t.Logf("long tasks: %v", lt)
	p.eval(`document.querySelectorAll('#thread-list li').length`, &rows)
	t.Logf("scrolling 10,000 rows: %d frames, p95 gap %.1f ms (idle page: %.1f ms over %d frames), longest %.1f ms; %d rows in the DOM",
		frames.N, frames.P95, frames.IdleP95, frames.IdleN, frames.Max, rows)
	if rows > 80 {
		t.Errorf("%d rows in the DOM at the end of the list", rows)
	}
	if frames.P95 > 50 {
		t.Errorf("scrolling the list: p95 frame gap %.1f ms (want under 50)", frames.P95)
	}
	// The end of the list is the thread with the oldest activity, as the
	// listing says (ties by id); the listing was taken before the first 20
	// threads changed, and those are now the most recent of all.
	var lastRow string
	p.eval(`document.querySelector('#thread-list li[aria-posinset="10000"]').dataset.thread`, &lastRow)
	at := func(e entry) time.Time {
		if e.LastEvent != nil {
			return *e.LastEvent
		}
		return e.Updated
	}
	changed := map[string]bool{}
	for i := range 20 {
		changed[bulk(i)] = true
	}
	var oldest *entry
	for i, e := range listing.Threads {
		if changed[e.Thread] {
			continue
		}
		if oldest == nil {
			oldest = &listing.Threads[i]
			continue
		}
		if a, b := at(e).UnixMilli(), at(*oldest).UnixMilli(); a < b || a == b && e.Thread > oldest.Thread {
			oldest = &listing.Threads[i]
		}
	}
	if lastRow != oldest.Thread {
		t.Errorf("the last row is %s, the listing's least recent thread %s", lastRow, oldest.Thread)
	}
	shot(t, p.ctx, "10000-threads-end")

	// The long finished thread opens at its newest message: with the
	// default window, and with a window holding all 400 messages (cards
	// the browser has not laid out yet are estimated, not measured).
	for _, window := range []int{0, 400} {
		hash := "#tenant=globex&thread=" + url.QueryEscape(long)
		if window > 0 {
			hash += "&window=" + strconv.Itoa(window)
		}
		p.run("open the long thread", chromedp.Navigate(tc.URL+"/?window="+strconv.Itoa(window)+hash))
		p.poll("its newest message drawn", `(() => { const a = document.querySelectorAll('#messages article'); return a.length > 0 && a[a.length - 1].dataset.id === `+strconv.Quote(lastID)+`; })()`, 30*time.Second)
		// At the end, the last message in full view, and staying there.
		p.poll("at its newest message for half a second", `(() => {
			const box = document.getElementById('messages');
			const b = box.getBoundingClientRect();
			const a = document.querySelectorAll('#messages article');
			const r = a[a.length - 1].getBoundingClientRect();
			const ok = box.scrollHeight - box.scrollTop - box.clientHeight <= 2 && r.bottom <= b.bottom && r.top >= b.top;
			window.__atEnd = ok ? (window.__atEnd || 0) + 1 : 0;
			return window.__atEnd >= 25;
		})()`, 15*time.Second)
		shot(t, p.ctx, "long-thread-window-"+strconv.Itoa(window))
	}
}
