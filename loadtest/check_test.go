package main

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/reducer"
)

// sseMsg is one SSE message as received.
type sseMsg struct{ id, data string }

// recorded is one thread played through a real embedded Threadcast, with
// what an agui and a view SSE subscriber received from it.
type recorded struct {
	sys      *embedded
	token    string
	th       *threadInfo
	agui     []sseMsg
	view     []sseMsg
	lastSeq  uint64
	frameIDs []uint64 // agui frame ends, in order
	expect   uint64   // the final seq: one message per event, only this thread in the stream
}

// record publishes two runs of a demo thread, one event per message (each
// waits for its ack, so most become a frame of their own), and records the
// two streams up to the last seq.
func record(t *testing.T) *recorded {
	t.Helper()
	sys, err := startEmbedded(2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	tok, err := auth.Mint(sys.Key, auth.Claims{Tenant: "acme", Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	pc := agent.DefaultConfig()
	pc.Linger = 0
	pub, err := agent.New(sys.nc, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close(context.Background()) })
	const thread = "check-thread"
	rec := &recorded{sys: sys, token: tok, th: &threadInfo{tenant: "acme", thread: thread, born: make(chan struct{}), offline: reducer.NewThread(thread)}}
	close(rec.th.born)
	s := demo.NewScript(7, demo.Options{ThreadID: thread, ErrorRate: -1, CancelRate: -1})
	events := append(s.NextRun(), s.NextRun()...)
	var dec codec.Decoder
	var ev codec.Event
	ctx := context.Background()
	publish := func(b []byte) {
		f, err := pub.Publish(ctx, "acme", thread, b)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := f.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := dec.Decode(b, &ev); err != nil {
			t.Fatal(err)
		}
		rec.th.offline.Apply(ack.Seq, &ev)
		rec.lastSeq = ack.Seq
	}
	rec.expect = uint64(len(events))
	publish(events[0].JSON)
	aguiC := rec.stream(t, "")
	viewC := rec.stream(t, "view")
	time.Sleep(200 * time.Millisecond) // both joined (their snapshots are at seq 1 or later)
	for _, e := range events[1:] {
		publish(e.JSON)
		// Ingest coalesces the messages it finds queued into one frame;
		// a pause lets most events be a frame of their own, so that the
		// mutations below hit one frame among many.
		time.Sleep(3 * time.Millisecond)
	}
	rec.agui, rec.view = <-aguiC, <-viewC
	rec.th.lastSeq = rec.lastSeq
	if rec.lastSeq != rec.expect {
		t.Fatalf("last seq %d, want %d (one message per event)", rec.lastSeq, rec.expect)
	}
	for _, m := range rec.agui {
		if n, err := strconv.ParseUint(m.id, 10, 64); err == nil {
			rec.frameIDs = append(rec.frameIDs, n)
		}
	}
	return rec
}

// stream reads SSE messages until the one with id lastSeq (set before it
// can arrive: the reader polls rec.lastSeq only after the last publish).
func (rec *recorded) stream(t *testing.T, mode string) <-chan []sseMsg {
	t.Helper()
	u := rec.sys.URL + "/v1/threads/" + url.PathEscape(rec.th.thread) + "/events"
	if mode != "" {
		u += "?mode=" + mode
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+rec.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, res.Status)
	}
	out := make(chan []sseMsg, 1)
	go func() {
		defer res.Body.Close()
		var msgs []sseMsg
		var m sseMsg
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.id != "" || m.data != "" {
					msgs = append(msgs, m)
					// The total event count is known once the test stopped
					// publishing: 2 runs; stop at the final frame end.
					if m.id == strconv.FormatUint(rec.lastSeqWhenDone(), 10) {
						out <- msgs
						return
					}
				}
				m = sseMsg{}
			case strings.HasPrefix(line, "id: "):
				m.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				m.data = line[6:]
			}
		}
		out <- msgs
	}()
	return out
}

// lastSeqWhenDone is the final seq: known from the number of events, since
// every event is one message and the stream holds only this thread.
func (rec *recorded) lastSeqWhenDone() uint64 { return rec.expect }

// newTestSub returns a subscriber of rec's thread fed by hand.
func (rec *recorded) newTestSub(v variant) (*runner, *sub) {
	r := &runner{cfg: DefaultConfig(), bases: []string{rec.sys.URL}, tokens: map[string]string{"acme": rec.token},
		client: http.DefaultClient, series: newSeries(time.Now(), 60), errLast: map[string]int{}, pubErrLast: map[string]int{}}
	for i := range r.hists {
		r.hists[i] = new(Histogram)
	}
	s := &sub{r: r, th: rec.th, v: v}
	r.threads, r.subs = []*threadInfo{rec.th}, []*sub{s}
	return r, s
}

// feed hands msgs to s as one connection would.
func feed(s *sub, msgs []sseMsg) {
	for i, m := range msgs {
		_ = s.dispatchSSE(m.id, []byte(m.data), m.data != "", i == 0)
	}
}

// The check passes on the streams as received, and catches one frame
// dropped or duplicated, in either mode.
func TestCheckCatchesDroppedAndDuplicatedFrames(t *testing.T) {
	rec := record(t)
	if len(rec.frameIDs) < 10 {
		t.Fatalf("only %d agui frames recorded", len(rec.frameIDs))
	}
	// A frame in the middle whose events change the messages: one carrying
	// a content delta.
	var victim string
	for _, m := range rec.agui[len(rec.agui)/2:] {
		if strings.Contains(m.data, `"TEXT_MESSAGE_CONTENT"`) || strings.Contains(m.data, `"op":"append"`) {
			victim, _, _ = strings.Cut(m.id, ".")
			break
		}
	}
	if victim == "" {
		t.Fatal("no content frame in the second half")
	}
	inFrame := func(m sseMsg) bool { seq, _, _ := strings.Cut(m.id, "."); return seq == victim }
	drop := func(msgs []sseMsg) []sseMsg {
		var out []sseMsg
		for _, m := range msgs {
			if !inFrame(m) {
				out = append(out, m)
			}
		}
		return out
	}
	dup := func(msgs []sseMsg) []sseMsg {
		var out, frame []sseMsg
		for _, m := range msgs {
			out = append(out, m)
			if inFrame(m) {
				frame = append(frame, m)
				if m.id == victim {
					out = append(out, frame...)
				}
			}
		}
		return out
	}
	tests := []struct {
		name     string
		v        variant
		give     func([]sseMsg) []sseMsg
		wantPass bool
	}{
		{"agui as received", aguiSSE, func(m []sseMsg) []sseMsg { return m }, true},
		{"view as received", viewSSE, func(m []sseMsg) []sseMsg { return m }, true},
		{"agui frame dropped", aguiSSE, drop, false},
		{"view frame dropped", viewSSE, drop, false},
		{"agui frame duplicated", aguiSSE, dup, false},
		{"view frame duplicated", viewSSE, dup, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, s := rec.newTestSub(tt.v)
			msgs := rec.agui
			if tt.v.view() {
				msgs = rec.view
			}
			give := tt.give(msgs)
			if !tt.wantPass && len(give) == len(msgs) {
				t.Fatalf("the mutation changed nothing (victim %s)", victim)
			}
			feed(s, give)
			c := r.check(context.Background())
			if c.ThreadsMismatch != 0 {
				t.Fatalf("REST view differs from the offline reduction: %v", c.Failures)
			}
			if c.Pass != tt.wantPass {
				t.Errorf("pass = %v, want %v (gaps %d, dups %d, fold errors %d, mismatches %d: %v)",
					c.Pass, tt.wantPass, c.Gaps, c.Duplicates, c.FoldErrors, c.SubsMismatch, c.Failures)
			}
		})
	}
}
