package agent

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestQueueTake drives a thread's queue directly: events pushed while
// batches of various limits are taken must come out complete, in order, and
// within the limits, whether take hands the whole queue over, copies part of
// it, or compacts the sent head away.
func TestQueueTake(t *testing.T) {
	event := func(i int) []byte {
		return []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m",` + "\n" + `"delta":"` + strconv.Itoa(i) + `"}`)
	}
	tests := []struct {
		name                string
		maxEvents, maxBytes int
		pushPerTake         int // events pushed between two takes
		total               int
	}{
		{name: "one at a time, long queue", maxEvents: 1, maxBytes: 1 << 20, pushPerTake: 3, total: 600},
		{name: "small batches", maxEvents: 7, maxBytes: 1 << 20, pushPerTake: 10, total: 1000},
		{name: "byte limit", maxEvents: 1000, maxBytes: 200, pushPerTake: 9, total: 500},
		{name: "whole queue each time", maxEvents: 1000, maxBytes: 1 << 20, pushPerTake: 5, total: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MaxBatchEvents, cfg.MaxBatchBytes = tt.maxEvents, tt.maxBytes
			p := &Publisher{cfg: cfg.withDefaults(), inflight: map[*nats.Msg]*message{}}
			th := &thread{subject: "agui.a.t.events"}
			pushed, next := 0, 0
			for next < tt.total {
				for k := 0; k < tt.pushPerTake && pushed < tt.total; k++ {
					th.push(event(pushed), item{fut: newFuture(), gen: uint64(pushed)})
					pushed++
				}
				if len(th.queued()) == 0 {
					continue
				}
				m := p.take(th)
				th.inflight = nil
				lines := bytes.Split(m.msg.Data, []byte("\n"))
				if len(lines) != len(m.items) || len(lines) > tt.maxEvents {
					t.Fatalf("message of %d lines, %d items (max %d)", len(lines), len(m.items), tt.maxEvents)
				}
				if len(lines) > 1 && len(m.msg.Data) > tt.maxBytes {
					t.Fatalf("batch of %d bytes over %d", len(m.msg.Data), tt.maxBytes)
				}
				for i, l := range lines {
					want := bytes.ReplaceAll(event(next), []byte("\n"), []byte(" "))
					if !bytes.Equal(l, want) || m.items[i].gen != uint64(next) {
						t.Fatalf("event %d: got %q (gen %d), want %q", next, l, m.items[i].gen, want)
					}
					next++
				}
				if h := m.msg.Header.Get(headerBatch); len(lines) > 1 && h != strconv.Itoa(len(lines)) || len(lines) == 1 && h != "" {
					t.Fatalf("%s header %q for %d events", headerBatch, h, len(lines))
				}
				// The sent head is dropped once it is half the queue: the
				// slots kept stay proportional to what is queued.
				if len(th.items) > 2*len(th.queued())+64+tt.maxEvents {
					t.Fatalf("%d item slots kept for %d queued events", len(th.items), len(th.queued()))
				}
			}
			if pushed != tt.total || len(th.queued()) != 0 {
				t.Fatalf("pushed %d, %d left", pushed, len(th.queued()))
			}
		})
	}
}
