package reducer

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/codec"
)

// BenchmarkCostByType is a diagnostic, not a rate: it times Decode and
// Apply of every event of the short threads separately and logs, per event
// type, the mean cost of each and the type's share of the total. The clock
// reads cost tens of nanoseconds themselves; the table subtracts the cost of
// an empty timed interval measured in the same loop, so the figures are
// estimates, good for ranking where the time goes in the mixed stream, not
// for comparing with BenchmarkDecodeApplyShortSequential.
//
//	go test -run '^$' -bench CostByType -benchtime 20x -v ./reducer
func BenchmarkCostByType(b *testing.B) {
	loadShortFixtures(b)
	streams, ids := benchFixtures.short, benchFixtures.shortIDs
	var dec codec.Decoder
	var ev codec.Event
	var decode, apply [codec.NumTypes + 1]time.Duration
	var count [codec.NumTypes + 1]int
	var newThread, empty time.Duration
	for i := 0; i < b.N; i++ {
		for k, s := range streams {
			t0 := time.Now()
			thr := NewThread(ids[k])
			newThread += time.Since(t0)
			for j, raw := range s {
				t0 := time.Now()
				t1 := time.Now()
				err := dec.Decode(raw, &ev)
				t2 := time.Now()
				res := thr.Apply(uint64(j+1), &ev)
				t3 := time.Now()
				if err != nil || res.Fatal != nil {
					b.Fatalf("thread %d event %d: %v %v", k, j, err, res.Fatal)
				}
				empty += t1.Sub(t0)
				decode[ev.Type] += t2.Sub(t1)
				apply[ev.Type] += t3.Sub(t2)
				count[ev.Type]++
			}
		}
	}
	events := 0
	for _, n := range count {
		events += n
	}
	over := float64(empty) / float64(events) // one timed interval's own cost
	type row struct {
		typ           codec.Type
		n             int
		decode, apply float64 // ns per event, instrument cost subtracted
	}
	var rows []row
	total := float64(newThread)
	for t, n := range count {
		if n == 0 {
			continue
		}
		r := row{codec.Type(t), n, float64(decode[t])/float64(n) - over, float64(apply[t])/float64(n) - over}
		rows = append(rows, r)
		total += (r.decode + r.apply) * float64(n)
	}
	sort.Slice(rows, func(i, j int) bool {
		return (rows[i].decode+rows[i].apply)*float64(rows[i].n) > (rows[j].decode+rows[j].apply)*float64(rows[j].n)
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "per event type, %d events; instrument cost %.0f ns subtracted from each figure\n", events, over)
	fmt.Fprintf(&sb, "%-26s %8s %10s %10s %7s\n", "type", "events", "decode ns", "apply ns", "share")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-26s %8d %10.0f %10.0f %6.1f%%\n", r.typ, r.n/b.N, r.decode, r.apply,
			100*(r.decode+r.apply)*float64(r.n)/total)
	}
	fmt.Fprintf(&sb, "%-26s %8d %21.0f %6.1f%%", "NewThread", len(streams), float64(newThread)/float64(b.N*len(streams)),
		100*float64(newThread)/total)
	b.Log(sb.String())
}
