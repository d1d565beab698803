package fanout

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/internal/testsupport"
)

// A client resuming from the ring many frames back has read none of them:
// it gets them consolidated (a message's deltas joined), not one message
// per frame, resumed (no snapshot) up to the last frame.
func TestReplayConsolidated(t *testing.T) {
	_, base, js := startBackpressureServer(t, 1<<20, 32<<10)
	const thread = "replay-thread"
	tok := token(t, "acme")
	evs := backpressureStream(thread, 1, 3*replayCoalesceMin)
	first := publishFirst(t, js, base, tok, thread, evs[:3]...) // the run, the state and the message started
	live := openReader(t, http.DefaultClient, base, tok, thread, false)
	if err := live.readUntil(seqIs(first)); err != nil {
		t.Fatal(err)
	}
	cursor := live.lastID
	// Each delta its own frame, which the live reader takes as it comes,
	// so that the feed's ring has them all.
	var last uint64
	frames := 0
	for _, ev := range evs[3 : 3+3*replayCoalesceMin] {
		last = publishAll(t, js, thread, []string{ev}, 0)
		if err := live.readUntil(seqIs(last)); err != nil {
			t.Fatal(err)
		}
		frames++
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/threads/"+thread+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Last-Event-ID", cursor)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := &streamReader{name: "resumed", r: testsupport.NewSSEReader(res.Body), body: res.Body}
	msgs := 0
	for {
		ev, err := r.r.Next()
		if err != nil {
			t.Fatalf("read: %v after %d messages", err, msgs)
		}
		if ev.HasID {
			r.lastID = ev.ID
		}
		if ev.HasData {
			msgs++
			if strings.HasPrefix(ev.Data, `{"type":"RUN_STARTED"`) {
				t.Fatalf("resumed with a snapshot: %s", ev.Data)
			}
		}
		if r.lastID == strconv.FormatUint(last, 10) {
			break
		}
	}
	if msgs >= frames {
		t.Errorf("%d messages for %d frames resumed from the ring, want them consolidated", msgs, frames)
	}
	t.Logf("%d frames resumed as %d messages", frames, msgs)
}
