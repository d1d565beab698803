//go:build integration

package node_test

import (
	"testing"
	"time"
)

// TestNoisyNeighbour: with tenant noisy at ten times its events/s quota on
// the bridge and on NATS, tenant quiet loses and duplicates nothing (every
// event arrives once over SSE, and the REST view holds each exactly once),
// while noisy's excess is refused (429, counted) and shed (counted). Counts
// only: the latencies are BenchmarkNoisyNeighbour's.
func TestNoisyNeighbour(t *testing.T) {
	const quota = 50
	cfg := noisyConfig{Duration: 3 * time.Second, BThreads: 4, BRate: 100, AQuota: quota, ANoisy: true}
	r := runNoisy(t, cfg)
	t.Logf("%+v", r)
	if r.BSent == 0 || r.BDelivered != r.BSent || r.BLost != 0 || r.BDup != 0 || !r.BViewsExact {
		t.Errorf("quiet: sent %d, delivered %d, lost %d, duplicated %d, views exact %v",
			r.BSent, r.BDelivered, r.BLost, r.BDup, r.BViewsExact)
	}
	secs := cfg.Duration.Seconds() + 1
	// The bridge's bucket admits the burst (one second's worth) and the
	// rate; the run-start message adds 2.
	if max := int(quota*secs) + quota + 2; r.ABridge429 == 0 || r.ABridgeAccepted > max {
		t.Errorf("bridge: %d sent, %d accepted (max %d), %d refused", r.ABridgeSent, r.ABridgeAccepted, max, r.ABridge429)
	}
	if r.ABridgeRefusedMetric != float64(r.ABridge429) {
		t.Errorf("bridge refusals metric %v, 429s %d", r.ABridgeRefusedMetric, r.ABridge429)
	}
	// NATS: a partition's window applies at most rate+burst content events
	// per second; at ten times the quota most of them are shed.
	if min := float64(r.ANatsSent) - 2*quota*secs; r.AShed < min || r.AShed == 0 {
		t.Errorf("nats: %d sent, %v shed, want at least %v", r.ANatsSent, r.AShed, min)
	}
}
