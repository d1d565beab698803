package fanout

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// 1,000 reconnects, each with a Last-Event-ID picked at random among every
// id the client has seen (frame ends, positions inside frames, ids inside
// snapshots), on either of two nodes, while the thread keeps growing. The
// client restores the state it had at that id, as a client persisting its
// view per cursor would; after every message its text must be a prefix of
// the thread's text (each delta is unique, so a duplicate or a gap breaks
// the prefix at once), and it must end with the whole text.
func TestThousandRandomResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 1,000 HTTP reconnects")
	}
	ns := startNATS(t)
	th := newTestThread(t, connect(t, ns), "acme", "rr")
	// A small ring, so that old cursors fall out of it and take the
	// snapshot path.
	mod := func(c *Config) { c.Hub.RingFrames = 32 }
	srv1, n1 := newServer(t, connect(t, ns), mod)
	srv2, n2 := newServer(t, connect(t, ns), mod)
	nodes := []string{n1.URL, n2.URL}
	tok := token(t, "acme")
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]string{"": ""} // id → text after that message
	ids := []string{""}
	frame := 0
	publish := func() {
		chunks := make([]string, 1+r.IntN(3))
		for j := range chunks {
			chunks[j] = fmt.Sprintf("%d.%d;", frame, j)
		}
		frame++
		th.publish(t, chunks...)
	}
	publish()
	for reconnect := 0; reconnect < 1000; reconnect++ {
		cursor := ids[r.IntN(len(ids))]
		text := seen[cursor]
		var hdr http.Header
		if cursor != "" {
			hdr = http.Header{"Last-Event-Id": {cursor}}
		}
		c := openSSE(t, nodes[r.IntN(2)]+"/v1/threads/rr/events", tok, hdr)
		m := aguiModel{text: text}
		if r.IntN(3) == 0 {
			publish()
		}
		want := th.Text()
		n := 1 + r.IntN(8)
		timer := time.AfterFunc(5*time.Second, c.cancel)
		for read := 0; read < n && m.text != want; {
			msg, err := c.next()
			if err != nil {
				t.Fatalf("reconnect %d (cursor %q): %v with %q", reconnect, cursor, err, shorten(m.text))
			}
			if msg.data != "" {
				m.apply(t, msg.data)
				read++
				if !strings.HasPrefix(want, m.text) {
					t.Fatalf("reconnect %d (cursor %q): text %q is not a prefix of the thread's %q", reconnect, cursor, shorten(m.text), shorten(want))
				}
			}
			if msg.hasID {
				if _, ok := seen[msg.id]; !ok {
					ids = append(ids, msg.id)
				}
				seen[msg.id] = m.text
			}
		}
		timer.Stop()
		c.close()
	}
	c := openSSE(t, n1.URL+"/v1/threads/rr/events", tok, http.Header{"Last-Event-Id": {ids[len(ids)-1]}})
	m := aguiModel{text: seen[ids[len(ids)-1]]}
	m.follow(t, c, th.Text, 5*time.Second)
	resumes := counterValue(srv1.m.Resyncs.WithLabelValues(ReasonResume)) + counterValue(srv2.m.Resyncs.WithLabelValues(ReasonResume))
	joins := counterValue(srv1.m.Resyncs.WithLabelValues(ReasonJoin)) + counterValue(srv2.m.Resyncs.WithLabelValues(ReasonJoin))
	t.Logf("%d frames, %d distinct ids; %v resumed from a ring, %v from a snapshot", frame, len(ids), resumes, joins)
	if resumes < 100 || joins < 10 {
		t.Fatalf("both paths must be exercised: %v ring resumes, %v snapshots", resumes, joins)
	}
}
