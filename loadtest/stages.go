package main

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// StageOut is one stage of the server's latency budget: the
// threadcast_ingest_stage_seconds and threadcast_fanout_stage_seconds
// histograms, and the joins' (threadcast_fanout_join_wait_seconds,
// threadcast_fanout_join_seconds), scraped after the run (summed over the fanout nodes), with
// quantiles interpolated within their buckets (doubling from 100 µs: a
// quantile is known to within its bucket).
type StageOut struct {
	Stage string  `json:"stage"`
	Count uint64  `json:"count"`
	P50   float64 `json:"p50Ms"`
	P90   float64 `json:"p90Ms"`
	P99   float64 `json:"p99Ms"`
}

// stageFamilies are the histograms of the budget, in the order an event
// meets their stages, then the joins': how long a subscriber waited for a
// join slot, and for its first write (the slot's wait included). A family
// with a stage label is a stage per value; one without is the stage named.
var stageFamilies = []struct{ family, prefix, stage string }{
	{"threadcast_ingest_stage_seconds_bucket", "ingest ", ""},
	{"threadcast_fanout_stage_seconds_bucket", "fanout ", ""},
	{"threadcast_fanout_join_wait_seconds_bucket", "fanout ", "join slot"},
	{"threadcast_fanout_join_seconds_bucket", "fanout ", "join"},
}

var stageOrder = map[string]int{"ingest publish": 0, "ingest consume": 1, "ingest frame": 2, "fanout transit": 3, "fanout deliver": 4,
	"fanout join slot": 5, "fanout join": 6}

// takeStages removes the stage histograms' bucket series from m (keyed as
// scrapeMetrics keys them) and returns the budget they make.
func takeStages(m map[string]float64) []StageOut {
	type bucket struct{ le, n float64 }
	byStage := map[string][]bucket{}
	for k, v := range m {
		for _, f := range stageFamilies {
			rest, ok := strings.CutPrefix(k, f.family+"{")
			if !ok {
				continue
			}
			delete(m, k)
			stage, le := f.stage, labelValue(rest, "le")
			if stage == "" {
				stage = labelValue(rest, "stage")
			}
			bound, err := strconv.ParseFloat(le, 64)
			if stage == "" || err != nil {
				continue
			}
			byStage[f.prefix+stage] = append(byStage[f.prefix+stage], bucket{bound, v})
		}
	}
	var out []StageOut
	for stage, bs := range byStage {
		sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
		les, cum := make([]float64, len(bs)), make([]float64, len(bs))
		for i, b := range bs {
			les[i], cum[i] = b.le, b.n
		}
		total := cum[len(cum)-1]
		if total == 0 {
			continue
		}
		out = append(out, StageOut{Stage: stage, Count: uint64(total),
			P50: bucketQuantile(0.5, les, cum) * 1000, P90: bucketQuantile(0.9, les, cum) * 1000, P99: bucketQuantile(0.99, les, cum) * 1000})
	}
	sort.Slice(out, func(i, j int) bool { return stageOrder[out[i].Stage] < stageOrder[out[j].Stage] })
	return out
}

// bucketQuantile is the q-quantile of a cumulative histogram (upper bounds
// les, ascending, the last +Inf; counts cum), interpolated linearly within
// the bucket it falls in, as Prometheus' histogram_quantile does. In the
// +Inf bucket it is the largest finite bound.
func bucketQuantile(q float64, les, cum []float64) float64 {
	total := cum[len(cum)-1]
	rank := q * total
	i := sort.Search(len(cum), func(i int) bool { return cum[i] >= rank })
	if i >= len(les) {
		i = len(les) - 1
	}
	if math.IsInf(les[i], 1) {
		if i == 0 {
			return 0
		}
		return les[i-1]
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = les[i-1], cum[i-1]
	}
	in := cum[i] - below
	if in <= 0 {
		return les[i]
	}
	return lo + (les[i]-lo)*(rank-below)/in
}

// labelValue returns the value of label name in `a="x",b="y"}`, or "".
func labelValue(labels, name string) string {
	i := strings.Index(labels, name+`="`)
	if i < 0 {
		return ""
	}
	v := labels[i+len(name)+2:]
	v, _, _ = strings.Cut(v, `"`)
	return v
}
