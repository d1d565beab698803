//go:build browser

package web_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/longthread"
	"github.com/threadcast/threadcast/internal/testsupport"
)

// TestDashboardScrollsBackInBrowser opens a thread of 600 messages: the page shows
// the newest 50 at once, and as a person scrolls up (mouse wheel events over
// the message list) it reads older pages, keeping the message that was at
// the top on screen, until it holds the whole thread — in the order of the
// REST view.
func TestDashboardScrollsBackInBrowser(t *testing.T) {
	tc := startThreadcast(t)
	js, err := jetstream.New(tc.nc)
	if err != nil {
		t.Fatal(err)
	}
	const thread = "long-thread"
	g := &longthread.Gen{Thread: thread, RunLen: 40, Body: 120}
	evs := append(g.Messages(600), g.Finish()...)
	var last uint64
	for i := 0; i < len(evs); i += 200 {
		ack, err := js.PublishMsg(t.Context(), batchMsg(t, "acme", thread, evs[i:min(i+200, len(evs))]))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	var rest struct {
		Seq  uint64
		View struct{ Messages []struct{ ID string } }
	}
	testsupport.WaitFor(t, 30*time.Second, "the thread reduced", func() bool {
		return tc.get(t, "acme", threadPath(thread), &rest) == 200 && rest.Seq == last
	})
	var wantIDs []string
	for _, m := range rest.View.Messages {
		wantIDs = append(wantIDs, m.ID)
	}

	p := newPage(t)
	ctx, poll, eval := p.ctx, p.poll, p.eval
	p.run("open the thread", chromedp.Navigate(tc.URL+"/#tenant=acme&thread="+url.QueryEscape(thread)))
	poll("the newest 50 messages shown", `(() => {
		const arts = document.querySelectorAll('#messages article');
		return arts.length === 50 && arts[49].dataset.id === `+strconv.Quote(wantIDs[len(wantIDs)-1])+`;
	})()`, 30*time.Second)
	var meta string
	eval(`document.getElementById('thread-meta').textContent`, &meta)
	if !strings.Contains(meta, "50 of "+strconv.Itoa(len(wantIDs))+" messages") {
		t.Fatalf("thread meta %q does not say 50 of %d", meta, len(wantIDs))
	}
	shot(t, ctx, "window")

	// The wheel, over the middle of the message list.
	var box struct{ X, Y float64 }
	eval(`(() => { const r = document.getElementById('messages').getBoundingClientRect(); return {X: r.x + r.width / 2, Y: r.y + r.height / 2}; })()`, &box)
	wheel := func() { p.wheel(box.X, box.Y, -1500) }
	// Scroll up until the first page is put in front: the message that
	// was first is still on screen, not pushed out by what came in. The
	// steps are shorter than the list is high, so that a step still
	// scrolling when the page comes in cannot itself carry that message
	// off screen (1,500 px steps did, in about one run in five).
	step := func() { p.wheel(box.X, box.Y, -300) }
	var first string
	eval(`document.querySelector('#messages article').dataset.id`, &first)
	deadline := time.Now().Add(30 * time.Second)
	for n := 50; n == 50; {
		if time.Now().After(deadline) {
			shot(t, ctx, "failure")
			t.Fatal("scrolling up loaded no older page")
		}
		step()
		eval(`document.querySelectorAll('#messages article').length`, &n)
	}
	poll("the page is drawn", `document.querySelectorAll('#messages article')[0].dataset.id !== `+strconv.Quote(first), 5*time.Second)
	var visible bool
	eval(`(() => {
		const box = document.getElementById('messages').getBoundingClientRect();
		const r = document.querySelector('#messages article[data-id=`+strconv.Quote(first)+`]').getBoundingClientRect();
		return r.bottom > box.top && r.top < box.bottom;
	})()`, &visible)
	if !visible {
		shot(t, ctx, "failure")
		t.Fatalf("the message that was first (%s) left the screen when older ones came in", first)
	}
	shot(t, ctx, "older-page")

	// On to the first message.
	deadline = time.Now().Add(60 * time.Second)
	for {
		var n int
		eval(`document.querySelectorAll('#messages article').length`, &n)
		if n == len(wantIDs) {
			break
		}
		if time.Now().After(deadline) {
			shot(t, ctx, "failure")
			t.Fatalf("after a minute of scrolling, %d of %d messages", n, len(wantIDs))
		}
		wheel()
	}
	var gotIDs []string
	eval(`[...document.querySelectorAll('#messages article')].map(a => a.dataset.id)`, &gotIDs)
	if strings.Join(gotIDs, ",") != strings.Join(wantIDs, ",") {
		t.Fatalf("the page holds %d messages, not the REST view's %d in order", len(gotIDs), len(wantIDs))
	}
	eval(`document.getElementById('thread-meta').textContent`, &meta)
	if !strings.Contains(meta, strconv.Itoa(len(wantIDs))+" messages") || strings.Contains(meta, " of ") {
		t.Fatalf("thread meta %q after reading every page", meta)
	}
	shot(t, ctx, "scrolled-back")
}
