package demo

import (
	"encoding/json"
	"testing"
)

// BenchmarkScriptNextRun measures whole-run generation: the cost per event
// is what a load generator pays on top of publishing.
func BenchmarkScriptNextRun(b *testing.B) {
	b.ReportAllocs()
	s := NewScript(1, Options{})
	events, bytes := 0, 0
	for b.Loop() {
		run := s.NextRun()
		if run[0].Type != RunStarted {
			b.Fatal("run does not start with RUN_STARTED")
		}
		events += len(run)
		for _, e := range run {
			bytes += len(e.JSON)
		}
	}
	b.SetBytes(int64(bytes / max(b.N, 1)))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}

// The hottest event, TEXT_MESSAGE_CONTENT, built by the package's appender
// and, as the baseline, by encoding/json from a map (what a naive generator
// would do; it also escapes '<' as \u003c, which the demo must not).
func BenchmarkContentEvent(b *testing.B) {
	b.Run("appender", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out := event(TextMessageContent).str("messageId", "msg_1a2b3c4d").str("delta", " stroller-friendly").done()
			if len(out) == 0 {
				b.Fatal("empty")
			}
		}
	})
	b.Run("encoding/json map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := json.Marshal(map[string]string{"type": TextMessageContent, "messageId": "msg_1a2b3c4d", "delta": " stroller-friendly"})
			if err != nil || len(out) == 0 {
				b.Fatal(err)
			}
		}
	})
}
