package fanout

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkIdleFeedFootprint reports the memory one lingering feed of a
// thread with no traffic holds (heap and goroutine stacks, in this
// process; the NATS server's side is not counted): the cost the idle
// bounds cap. b.N feeds are created and left lingering.
func BenchmarkIdleFeedFootprint(b *testing.B) {
	h, _ := newIdleHub(b, -1, -1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		visit(b, h, "acme", fmt.Sprint(i))
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := float64(counterValue(h.m.IdleFeeds))
	if n == 0 {
		b.Fatal("no lingering feed")
	}
	used := float64(after.HeapInuse+after.StackInuse) - float64(before.HeapInuse+before.StackInuse)
	b.ReportMetric(used/n, "B/idle-feed")
}
