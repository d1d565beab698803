package compact

import (
	"testing"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
)

// BenchmarkCompact measures Events on a random valid stream (testdata/
// compact), per input event. Events applies the events to a Thread to learn
// their verdicts, so the baseline beside it is that apply alone; the
// difference is what compaction itself costs.
func BenchmarkCompact(b *testing.B) {
	c := loadFixture(b, fixtures[0].name)
	b.Run("apply-baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			th := reducer.NewThread("bench")
			for i, ev := range c.events {
				if res := th.Apply(uint64(i)+1, ev); res.Fatal != nil {
					b.Fatal(res.Fatal)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.events)), "ns/event")
	})
	b.Run("compact", func(b *testing.B) {
		b.ReportAllocs()
		var out []*codec.Event
		for b.Loop() {
			out = Events(c.events)
			if len(out) == 0 || len(out) >= len(c.events) {
				b.Fatalf("compacted %d events to %d", len(c.events), len(out))
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.events)), "ns/event")
		b.ReportMetric(float64(len(out))/float64(len(c.events)), "out/in")
	})
}
