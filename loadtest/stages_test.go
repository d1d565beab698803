package main

import (
	"math"
	"testing"
)

// The budget's quantiles against ones worked out by hand from the buckets,
// and the stage series taken out of the flat metrics.
func TestTakeStages(t *testing.T) {
	m := map[string]float64{
		`threadcast_ingest_stage_seconds_bucket{stage="consume",le="0.001"}`: 50,
		`threadcast_ingest_stage_seconds_bucket{stage="consume",le="0.002"}`: 90,
		`threadcast_ingest_stage_seconds_bucket{stage="consume",le="0.004"}`: 100,
		`threadcast_ingest_stage_seconds_bucket{stage="consume",le="+Inf"}`:  100,
		`threadcast_fanout_stage_seconds_bucket{stage="deliver",le="0.001"}`: 0,
		`threadcast_fanout_stage_seconds_bucket{stage="deliver",le="+Inf"}`:  10,
		`threadcast_fanout_streams_ended_total{reason="write"}`:              3,
	}
	got := takeStages(m)
	if len(m) != 1 {
		t.Fatalf("left %v, want only the counter", m)
	}
	if len(got) != 2 || got[0].Stage != "ingest consume" || got[1].Stage != "fanout deliver" {
		t.Fatalf("stages %+v", got)
	}
	c := got[0]
	// p50: rank 50 is the top of the first bucket [0, 1 ms]: 1 ms. p90:
	// rank 90, the top of [1, 2 ms]: 2 ms. p99: rank 99 in [2, 4 ms] holding
	// ranks 90..100: 2 + 2×9/10 = 3.8 ms.
	for _, q := range []struct{ got, want float64 }{{c.P50, 1}, {c.P90, 2}, {c.P99, 3.8}} {
		if math.Abs(q.got-q.want) > 1e-9 {
			t.Errorf("consume quantiles %+v, want 1, 2, 3.8 ms", c)
		}
	}
	if c.Count != 100 {
		t.Errorf("count %d", c.Count)
	}
	// Everything past the last finite bound: the bound is what is known.
	if d := got[1]; d.P50 != 1 || d.P99 != 1 {
		t.Errorf("deliver %+v, want 1 ms (the largest finite bound)", d)
	}
}
