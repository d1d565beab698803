package fanout

import (
	"strings"
	"testing"
	"time"
)

// nextDataWithin returns the next SSE message with data, failing when none
// comes within d (the stream is cancelled then).
func nextDataWithin(t *testing.T, c *sseClient, d time.Duration) string {
	t.Helper()
	timer := time.AfterFunc(d, c.cancel)
	defer timer.Stop()
	for {
		m, err := c.next()
		if err != nil {
			t.Fatalf("no data within %v: %v", d, err)
		}
		if m.data != "" {
			return m.data
		}
	}
}

// expectEndWithin is expectEnd, failing when the end hint does not come
// within d.
func expectEndWithin(t *testing.T, c *sseClient, want string, d time.Duration) {
	t.Helper()
	timer := time.AfterFunc(d, c.cancel)
	defer timer.Stop()
	expectEnd(t, c, want)
}

// TestAdoptResyncsLiveSubscribers: live subscribers at seq 2; the frame that
// takes the thread to 7 never reaches the feed, and the thread then stays
// silent. A late joiner whose snapshot (windowed, so not the feed's cached
// one) is at 7 waits JoinWait for the frames up to it, then adopts 7 as the
// feed's position. The live subscribers behind it are resynchronised then,
// with no further frame: the view subscriber gets the view at 7, the agui
// stream ends with a resume hint.
func TestAdoptResyncsLiveSubscribers(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "adopt")
	srv, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	th.publish(t, "a;")
	c := openSSE(t, hs.URL+"/v1/threads/adopt/events", tok, nil)
	v := openSSE(t, hs.URL+"/v1/threads/adopt/events?mode=view", tok, nil)
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	if d := nextData(t, v); !strings.Contains(d, `"type":"view","seq":2`) {
		t.Fatalf("first view: %s", d)
	}

	th.loseFrame("lost;")
	late := openSSE(t, hs.URL+"/v1/threads/adopt/events?mode=view&window=5", tok, nil)
	if d := nextData(t, late); !strings.Contains(d, `"type":"view","seq":7`) || !strings.Contains(d, "a;lost;") {
		t.Fatalf("late joiner's view: %s", d)
	}
	// openSSE returned after the join, so the adoption is done: the
	// resyncs are due now, not at a next frame (none comes).
	bound := 2 * time.Second
	if d := nextDataWithin(t, v, bound); !strings.Contains(d, `"type":"view","seq":7`) || !strings.Contains(d, "a;lost;") {
		t.Fatalf("live view subscriber after the adoption: %s", d)
	}
	expectEndWithin(t, c, "end reason=resync after=2", bound)
	if got := counterValue(srv.m.Drops.WithLabelValues(ReasonGap)); got != 2 {
		t.Errorf("gap drops = %v, want 2 (one per live subscriber behind)", got)
	}
}
