package quota

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkTake is the bridge's per-event check: one shard lock, two
// buckets. RunParallel over 1 and 1,000 tenants (contention on one shard
// against spread over all of them); baseline: an atomic add per event, the
// least a shared per-tenant counter could cost.
func BenchmarkTake(b *testing.B) {
	for _, tenants := range []int{1, 1000} {
		names := make([]string, tenants)
		for i := range names {
			names[i] = "tenant-" + strconv.Itoa(i)
		}
		b.Run("tenants="+strconv.Itoa(tenants), func(b *testing.B) {
			c := DefaultConfig()
			c.Default = Limits{EventsPerSec: 1e12, BytesPerSec: 1e15}
			l, err := New(c)
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1))
				for pb.Next() {
					if err := l.Take(names[i%tenants], 1, 90); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		})
	}
	b.Run("baseline=atomic", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
}

// BenchmarkWindowAdmit is the NATS ingest's per-event check, one
// goroutine, one tenant per message among 100; baseline: the map lookup
// alone.
func BenchmarkWindowAdmit(b *testing.B) {
	names := make([]string, 100)
	for i := range names {
		names[i] = "tenant-" + strconv.Itoa(i)
	}
	lim := Limits{EventsPerSec: 1e12, BytesPerSec: 1e15}
	at := time.Unix(1_700_000_000, 0)
	b.Run("admit", func(b *testing.B) {
		var w Window
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok := w.Admit(lim, names[i%len(names)], at, 1, 90, false); !ok {
				b.Fatal("shed")
			}
			i++
		}
	})
	b.Run("baseline=map", func(b *testing.B) {
		m := map[string]*windowCount{}
		for _, n := range names {
			m[n] = &windowCount{}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m[names[i%len(names)]].events++
			i++
		}
	})
}
