package main

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// NOTE: an HDR-style log-linear histogram. Values below 2^subBits are
// counted exactly; above, each power-of-two range [2^e, 2^(e+1)) is cut into
// 2^subBits equal sub-buckets, so a reported quantile is within a relative
// 1/2^subBits (0.8 % with 7 bits) of the true sample. Buckets are atomic
// counters: recording is lock-free from any number of goroutines, which is
// what thousands of subscriber goroutines need, and costs one index
// computation and three atomic adds.

const (
	subBits    = 7
	subCount   = 1 << subBits
	maxBits    = 42 // values up to 2^42 ns (~73 min) are exact to the bucket; larger ones clamp
	numBuckets = (maxBits - subBits + 1) * subCount
)

// Histogram counts non-negative int64 samples (nanoseconds here). The zero
// value is ready to use; it is safe for concurrent use.
type Histogram struct {
	counts [numBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64
	max    atomic.Int64
	min    atomic.Int64 // stored as min+1 so that 0 means "none yet"
}

// bucketOf returns the index of v's bucket.
func bucketOf(v int64) int {
	if v < 0 {
		v = 0
	}
	u := uint64(v)
	if u >= 1<<maxBits {
		u = 1<<maxBits - 1
	}
	if u < subCount {
		return int(u)
	}
	shift := bits.Len64(u) - 1 - subBits
	return shift*subCount + int(u>>shift)
}

// bucketBounds returns the smallest and largest value counted in bucket i.
func bucketBounds(i int) (lo, hi int64) {
	if i < subCount {
		return int64(i), int64(i)
	}
	shift := i/subCount - 1
	mant := int64(i - shift*subCount)
	return mant << shift, (mant+1)<<shift - 1
}

// Record counts one sample.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(uint64(v))
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
	vp := v + 1
	if v == math.MaxInt64 {
		vp = v // min is then off by one, for a sample no latency reaches
	}
	for {
		m := h.min.Load()
		if (m != 0 && vp >= m) || h.min.CompareAndSwap(m, vp) {
			break
		}
	}
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 { return h.n.Load() }

// Max returns the largest sample (0 when empty).
func (h *Histogram) Max() int64 { return h.max.Load() }

// Mean returns the mean sample (0 when empty).
func (h *Histogram) Mean() float64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return float64(h.sum.Load()) / float64(n)
}

// Quantile returns the q-quantile (0 < q ≤ 1) as the sample of rank
// ceil(q·n) in sorted order, to the bucket's precision: the bucket's upper
// bound, clamped to the observed min and max (so Quantile(1) is the exact
// max). 0 when empty. Concurrent Records may or may not be seen.
func (h *Histogram) Quantile(q float64) int64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	if rank >= n {
		return h.max.Load()
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			_, hi := bucketBounds(i)
			return min(max(hi, h.min.Load()-1), h.max.Load())
		}
	}
	return h.max.Load()
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(o.n.Load())
	h.sum.Add(o.sum.Load())
	if m := o.max.Load(); m > h.max.Load() {
		h.max.Store(m)
	}
	if m := o.min.Load(); m != 0 && (h.min.Load() == 0 || m < h.min.Load()) {
		h.min.Store(m)
	}
}
