package pipeline

import "github.com/prometheus/client_golang/prometheus"

// LeaseMetrics are the lease loop's Prometheus collectors (lease mode only).
// All fields are safe for concurrent use.
type LeaseMetrics struct {
	Held   prometheus.Gauge       // partitions whose lease this instance holds
	Events *prometheus.CounterVec // by event: acquired, released, lost, failed, restarted
}

// Lease event labels.
const (
	LeaseAcquired  = "acquired"  // a free partition claimed
	LeaseReleased  = "released"  // handed over after a drain (rebalance or shutdown)
	LeaseLost      = "lost"      // not renewed in time, or taken: stopped without release
	LeaseFailed    = "failed"    // the partition's run ended by itself; lease given back
	LeaseRestarted = "restarted" // a partition restarted in place after a delivery gap
)

// NewLeaseMetrics creates the collectors and registers them on reg (nil: not
// registered).
func NewLeaseMetrics(reg prometheus.Registerer) *LeaseMetrics {
	const ns = "threadcast_ingest"
	m := &LeaseMetrics{
		Held: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "leases_held", Help: "Partitions whose lease this instance holds."}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "lease_events_total",
			Help: "Partition lease events: acquired, released, lost, failed, restarted (delivery gap)."}, []string{"event"}),
	}
	for _, e := range []string{LeaseAcquired, LeaseReleased, LeaseLost, LeaseFailed, LeaseRestarted} {
		m.Events.WithLabelValues(e) // present at 0 from the start
	}
	if reg != nil {
		reg.MustRegister(m.Held, m.Events)
	}
	return m
}
