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
		// The joins' histograms have no stage label: each is one stage.
		`threadcast_fanout_join_seconds_bucket{le="0.0016"}`:      4,
		`threadcast_fanout_join_seconds_bucket{le="0.0032"}`:      8,
		`threadcast_fanout_join_seconds_bucket{le="+Inf"}`:        8,
		`threadcast_fanout_join_wait_seconds_bucket{le="0.0001"}`: 8,
		`threadcast_fanout_join_wait_seconds_bucket{le="+Inf"}`:   8,
	}
	got := takeStages(m)
	if len(m) != 1 {
		t.Fatalf("left %v, want only the counter", m)
	}
	if len(got) != 4 || got[0].Stage != "ingest consume" || got[1].Stage != "fanout deliver" ||
		got[2].Stage != "fanout join slot" || got[3].Stage != "fanout join" {
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
	// join: p50 is rank 4, the top of [0, 1.6 ms]; p90 rank 7.2 in
	// [1.6, 3.2 ms] holding ranks 4..8: 1.6 + 1.6×3.2/4 = 2.88 ms.
	if j := got[3]; j.Count != 8 || math.Abs(j.P50-1.6) > 1e-9 || math.Abs(j.P90-2.88) > 1e-9 {
		t.Errorf("join %+v, want 8 samples, p50 1.6 ms, p90 2.88 ms", j)
	}
}
