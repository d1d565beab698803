package fanout

import (
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/wire"
)

// The feed folds its frames for verdicts only while it has an agui
// subscriber: a thread read only in view mode (a dashboard) holds no
// reducer and does no fold.
func TestVerdictFoldOnlyForAgui(t *testing.T) {
	ns := startNATS(t)
	th := newTestThread(t, connect(t, ns), "acme", "vf")
	th.publish(t, "a;")
	srv, hs := newServer(t, connect(t, ns), nil)
	tok := token(t, "acme")
	folding := func() bool {
		sh := srv.hub.shard(feedKey{"acme", wire.EncodeThread("vf")})
		sh.mu.Lock()
		f := sh.feeds[feedKey{"acme", wire.EncodeThread("vf")}]
		sh.mu.Unlock()
		if f == nil {
			return false
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.vf != nil
	}

	view := openSSE(t, hs.URL+"/v1/threads/vf/events?mode=view", tok, nil)
	th.publish(t, "b;")
	for m, err := view.next(); !strings.Contains(m.data, "b;"); m, err = view.next() {
		if err != nil {
			t.Fatal(err)
		}
	}
	if folding() {
		t.Fatal("a feed read only in view mode folds its frames")
	}

	agui := openSSE(t, hs.URL+"/v1/threads/vf/events", tok, nil)
	var a aguiModel
	a.follow(t, agui, th.Text, 5*time.Second)
	testsupport.WaitFor(t, 5*time.Second, "the fold started for the agui subscriber", folding)

	agui.cancel()
	testsupport.WaitFor(t, 5*time.Second, "the agui subscriber gone", func() bool {
		return counterValue(srv.m.Subscribers.WithLabelValues(AguiSSE.String())) == 0
	})
	th.publish(t, "c;") // the next frame ends the fold
	for m, err := view.next(); !strings.Contains(m.data, "c;"); m, err = view.next() {
		if err != nil {
			t.Fatal(err)
		}
	}
	if folding() {
		t.Fatal("the fold goes on with only view subscribers left")
	}
}
