package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// oracle is the exact quantile: the sample of rank ceil(q·n).
func oracle(sorted []int64, q float64) int64 {
	r := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(r, 1)-1]
}

func TestHistogramQuantilesAgainstSortedSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		give func() int64
		n    int
	}{
		{"constant", func() int64 { return 3_500_000 }, 1000},
		{"small exact values", func() int64 { return rng.Int64N(100) }, 5000},
		{"uniform 0..10ms", func() int64 { return rng.Int64N(10_000_000) }, 100_000},
		{"lognormal around 4ms", func() int64 { return int64(4e6 * math.Exp(rng.NormFloat64())) }, 100_000},
		{"bimodal with a 2s tail", func() int64 {
			if rng.IntN(1000) == 0 {
				return 2e9 + rng.Int64N(1e9)
			}
			return 1e6 + rng.Int64N(1e6)
		}, 50_000},
		{"one sample", func() int64 { return 777 }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Histogram
			samples := make([]int64, tt.n)
			for i := range samples {
				samples[i] = tt.give()
				h.Record(samples[i])
			}
			slices.Sort(samples)
			if h.Count() != uint64(tt.n) {
				t.Fatalf("count %d, want %d", h.Count(), tt.n)
			}
			for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 1} {
				got, want := h.Quantile(q), oracle(samples, q)
				// Within the bucket's width: at most want/2^subBits above,
				// never below (the bucket's upper bound, clamped to max).
				if got < want || float64(got-want) > float64(want)/subCount+1 {
					t.Errorf("q%.3f = %d, want %d (±%.2f%%)", q, got, want, 100.0/subCount)
				}
			}
			if h.Max() != samples[len(samples)-1] {
				t.Errorf("max %d, want %d", h.Max(), samples[len(samples)-1])
			}
			var sum float64
			for _, s := range samples {
				sum += float64(s)
			}
			if m := sum / float64(tt.n); math.Abs(h.Mean()-m) > 1e-6*m+1e-9 {
				t.Errorf("mean %v, want %v", h.Mean(), m)
			}
		})
	}
}

func TestHistogramEmptyAndClamped(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Fatal("empty histogram reports non-zero")
	}
	h.Record(-5) // counted as 0
	h.Record(math.MaxInt64)
	if got := h.Quantile(0.5); got != 0 {
		t.Errorf("p50 of {0, max} = %d, want 0", got)
	}
	if got := h.Quantile(1); got != math.MaxInt64 {
		t.Errorf("p100 = %d, want the exact max", got)
	}
}

// Every value falls in the bucket whose bounds contain it, and buckets tile
// the range without gaps.
func TestBucketBounds(t *testing.T) {
	prevHi := int64(-1)
	for i := range numBuckets {
		lo, hi := bucketBounds(i)
		if lo != prevHi+1 || hi < lo {
			t.Fatalf("bucket %d = [%d,%d] after %d", i, lo, hi, prevHi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d: bucketOf(%d)=%d bucketOf(%d)=%d", i, lo, bucketOf(lo), hi, bucketOf(hi))
		}
		if i >= subCount && float64(hi-lo+1) > float64(lo)/subCount+1 {
			t.Fatalf("bucket %d [%d,%d] wider than 1/%d of its low bound", i, lo, hi, subCount)
		}
		prevHi = hi
	}
}

func TestHistogramConcurrentAndMerge(t *testing.T) {
	var h, a, b Histogram
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10_000 {
				v := int64(g*10_000 + i)
				h.Record(v)
				if v%2 == 0 {
					a.Record(v)
				} else {
					b.Record(v)
				}
			}
		})
	}
	wg.Wait()
	a.Merge(&b)
	for _, q := range []float64{0.5, 0.99, 1} {
		if h.Quantile(q) != a.Quantile(q) {
			t.Errorf("q%v: concurrent %d, merged %d", q, h.Quantile(q), a.Quantile(q))
		}
	}
	if h.Count() != 80_000 || a.Count() != 80_000 || h.Max() != 79_999 {
		t.Errorf("count %d / %d, max %d", h.Count(), a.Count(), h.Max())
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		v := int64(1)
		for pb.Next() {
			h.Record(v)
			v = v*7 + 3&(1<<30-1)
		}
	})
}
