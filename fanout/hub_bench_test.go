package fanout

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// BenchmarkHubDeliver measures the hub's per-frame work — enqueue one frame
// to n live subscribers of one variant, then each subscriber's Take — with
// the frame encoded once and shared (what the hub does) against encoding it
// per subscriber (the baseline the sharing replaces). No network: this is
// the CPU the fan-out adds on top of the writes.
func BenchmarkHubDeliver(b *testing.B) {
	ev := json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"` + string(make([]byte, 0)) + `hello, world — a typical streamed token run of a few words"}`)
	nc := connect(b, startNATS(b)) // the hub's requester needs one; nothing is sent
	for _, n := range []int{1, 100, 1000} {
		for _, shared := range []bool{true, false} {
			name := fmt.Sprintf("subs=%d/shared=%v", n, shared)
			b.Run(name, func(b *testing.B) {
				h := newHub(nc, HubConfig{QueueBytes: 1 << 30}, nil, nil)
				f := &feed{hub: h, subs: make(map[*subscriber]struct{}), ring: newRing(16)}
				subs := make([]*subscriber, n)
				for i := range subs {
					s := &subscriber{feed: f, variant: AguiSSE, limit: 1 << 30, signal: make(chan struct{}, 1), state: stLive}
					subs[i] = s
					f.subs[s] = struct{}{}
				}
				var buf []item
				b.ReportAllocs()
				b.SetBytes(int64(len(ev)) * int64(n))
				seq := uint64(0)
				for b.Loop() {
					fr := &frame{seq: seq + 1, prev: seq, events: []json.RawMessage{ev}}
					seq++
					f.mu.Lock()
					for _, s := range subs {
						if !shared {
							fr.enc[s.variant] = nil // forces a fresh encoding per subscriber
						}
						f.deliverLocked(s, fr)
					}
					f.mu.Unlock()
					for _, s := range subs {
						var resync string
						buf, _, resync = s.Take(buf)
						if len(buf) != 1 || resync != "" {
							b.Fatalf("took %d items, resync %q", len(buf), resync)
						}
						<-s.signal
					}
				}
			})
		}
	}
}

// BenchmarkRingPush is the ring's share of a busy thread's frame: a full
// ring (1 MiB of 1 kB frames) evicts its oldest frame on every push.
func BenchmarkRingPush(b *testing.B) {
	r := newRing(1024)
	frames := make([]frame, 2048)
	for i := range frames {
		frames[i] = frame{size: 1024}
	}
	b.ReportAllocs()
	seq := uint64(0)
	for b.Loop() {
		seq++
		fr := &frames[seq%uint64(len(frames))]
		fr.seq = seq
		r.push(fr, 1<<20)
	}
}

// BenchmarkOnMsg measures what the hub does with one small view frame as
// it arrives from NATS — parts check, decode, ring, delivery to one live
// subscriber, its Take — the path every frame takes; with fold=on, the
// feed's verdict fold for consolidation (coalesce.go) too.
func BenchmarkOnMsg(b *testing.B) {
	b.Run("fold=off", func(b *testing.B) { benchOnMsg(b, false) })
	b.Run("fold=on", func(b *testing.B) { benchOnMsg(b, true) })
}

func benchOnMsg(b *testing.B, fold bool) {
	h := newHub(connect(b, startNATS(b)), HubConfig{QueueBytes: 1 << 30}, nil, nil) // nothing is sent
	f := &feed{hub: h, subs: make(map[*subscriber]struct{}), ring: newRing(1024)}
	startFold := func() {
		if !fold {
			return
		}
		f.vf = &verdictFold{th: reducer.NewThread("t1")}
		for _, ev := range []string{`{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`, `{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`} {
			if _, err := f.vf.apply([]byte(ev)); err != nil {
				b.Fatal(err)
			}
		}
	}
	startFold()
	s := &subscriber{feed: f, variant: AguiSSE, limit: 1 << 30, signal: make(chan struct{}, 1), state: stLive}
	f.subs[s] = struct{}{}
	const n = 4096
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		seq, prev := strconv.Itoa(i+1), strconv.Itoa(i)
		msgs[i] = &nats.Msg{Subject: "view.acme.t1",
			Header: nats.Header{wire.HeaderSeq: {seq}, wire.HeaderPrev: {prev}},
			Data: []byte(`{"tenant":"acme","thread":"t1","seq":` + seq + `,"prev":` + prev +
				`,"status":"running","events":[{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hello, world — a typical streamed token run"}],"changes":{"append":"hello, world — a typical streamed token run"}}`)}
	}
	var buf []item
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == n { // start the chain again
			f.mu.Lock()
			f.known, s.last = false, 0
			startFold()
			f.mu.Unlock()
			i = 0
		}
		f.onMsg(msgs[i])
		i++
		buf, _, _ = s.Take(buf)
		if len(buf) != 1 {
			b.Fatalf("took %d items", len(buf))
		}
		select {
		case <-s.signal:
		default:
		}
	}
}
