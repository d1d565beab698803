package fanout

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadcast/threadcast/wire"
)

// Metrics are the fanout's counters. They are created per Server (no
// package-level collectors), so two servers can live in one test binary;
// Register adds them to a registry of the caller's choice.
type Metrics struct {
	Subscribers *prometheus.GaugeVec   // by variant
	Feeds       prometheus.Gauge       // threads with a NATS subscription on this node
	Frames      prometheus.Counter     // frames received from NATS
	BadFrames   prometheus.Counter     // frames that did not decode, or lost a part
	BadReplies  prometheus.Counter     // snapshot replies whose parts could not be assembled
	BadTap      prometheus.Counter     // tap messages whose parts could not be assembled
	Delivered   *prometheus.CounterVec // wire messages enqueued to subscribers, by variant
	BytesSent   *prometheus.CounterVec // bytes written to connections, by variant
	Resyncs     *prometheus.CounterVec // snapshots sent after join, by reason
	Drops       *prometheus.CounterVec // queues dropped, by reason
	Snapshots   *prometheus.CounterVec // snapshot requests, by result (ok, error, gave_up)
	// SnapshotRetries counts snapshot attempts retried, by reason (RetryBusy, ...).
	SnapshotRetries *prometheus.CounterVec
	Rejected        *prometheus.CounterVec   // requests refused, by status reason
	Latency         prometheus.Histogram     // event timestamp → write, seconds
	Ended           *prometheus.CounterVec   // streams ended, by reason
	TapDropped      prometheus.Counter       // tap messages dropped by a slow tap reader
	BogusCursors    prometheus.Counter       // client cursors past the thread's last stored event
	IdleFeeds       prometheus.Gauge         // of Feeds, the threads lingering with no subscriber
	IdleEnded       *prometheus.CounterVec   // lingering threads ended early by an idle bound, by bound (no tenant label: unbounded)
	QuotaRefused    *prometheus.CounterVec   // streams refused over a tenant quota, by tenant (bounded by quota.TenantLabels) and quota
	Coalesced       *prometheus.CounterVec   // subscriber backlogs consolidated past the high-water mark, by variant
	CoalescedSaved  *prometheus.CounterVec   // bytes those consolidations took out of the queues, by variant
	Paced           *prometheus.CounterVec   // stream writers that held back for a client with too much unread, by variant
	Stage           *prometheus.HistogramVec // where a frame's time goes on this node, by stage (StageTransit, StageDeliver)
	JoinWait        prometheus.Histogram     // how long streams waited for a join slot (Config.MaxJoins)
	Join            prometheus.Histogram     // how long streams took to join: handler to first write, JoinWait included
	stageTransit    prometheus.Observer
	stageDeliver    prometheus.Observer
	delivered       [numVariants]prometheus.Counter // Delivered's children, resolved once for the hot path
	coalesced       [numVariants]prometheus.Counter // Coalesced's children
	coalescedSaved  [numVariants]prometheus.Counter // CoalescedSaved's children
	paced           [numVariants]prometheus.Counter // Paced's children
	collectors      []prometheus.Collector
}

// The stages of threadcast_fanout_stage_seconds.
const (
	StageTransit = "transit"
	StageDeliver = "deliver"
)

// Reasons used as label values.
const (
	ReasonOverflow = "overflow" // subscriber queue over its byte limit
	ReasonGap      = "gap"      // a frame's Tc-Prev did not match the subscriber's last seq
	ReasonJoin     = "join"     // first snapshot of a new subscriber
	ReasonResume   = "resume"   // resumed from the ring, no snapshot needed
)

// NewMetrics returns unregistered metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		Subscribers:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "threadcast_fanout_subscribers", Help: "Connected subscribers by variant."}, []string{"variant"}),
		Feeds:           prometheus.NewGauge(prometheus.GaugeOpts{Name: "threadcast_fanout_threads", Help: "Threads with a NATS subscription on this node."}),
		Frames:          prometheus.NewCounter(prometheus.CounterOpts{Name: "threadcast_fanout_frames_received_total", Help: "View frames received from NATS."}),
		BadFrames:       prometheus.NewCounter(prometheus.CounterOpts{Name: "threadcast_fanout_bad_frames_total", Help: "View frames that did not decode or lost a part (dropped)."}),
		BadReplies:      prometheus.NewCounter(prometheus.CounterOpts{Name: "threadcast_fanout_bad_replies_total", Help: "Snapshot replies sent in parts that could not be assembled (lost part, malformed, over the size limit)."}),
		BadTap:          prometheus.NewCounter(prometheus.CounterOpts{Name: "threadcast_fanout_tap_bad_parts_total", Help: "Tap messages sent in parts that could not be assembled (dropped)."}),
		Delivered:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_messages_enqueued_total", Help: "Wire messages enqueued to subscribers."}, []string{"variant"}),
		BytesSent:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_bytes_sent_total", Help: "Bytes written to subscriber connections."}, []string{"variant"}),
		Resyncs:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_resyncs_total", Help: "Subscribers brought up to date with a snapshot or from the ring, by reason."}, []string{"reason"}),
		Drops:           prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_queue_drops_total", Help: "Subscriber queues dropped, by reason."}, []string{"reason"}),
		Snapshots:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_snapshot_requests_total", Help: "Snapshot requests to the pipeline, by result."}, []string{"result"}),
		SnapshotRetries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_snapshot_retries_total", Help: "Snapshot attempts retried after a transient failure, by reason."}, []string{"reason"}),
		Rejected:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_requests_rejected_total", Help: "HTTP requests refused, by reason."}, []string{"reason"}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "threadcast_fanout_latency_seconds", Help: "From an event's timestamp to its write to a subscriber.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		Ended:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_streams_ended_total", Help: "Streams ended, by reason."}, []string{"reason"}),
		TapDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "threadcast_fanout_tap_dropped_total", Help: "Tap messages dropped because a tap reader was slow."}),
		BogusCursors: prometheus.NewCounter(prometheus.CounterOpts{Name: "threadcast_fanout_bogus_cursors_total",
			Help: "Client cursors (Last-Event-ID, ?after=) past the thread's last stored event, answered with a snapshot at once."}),
		IdleFeeds: prometheus.NewGauge(prometheus.GaugeOpts{Name: "threadcast_fanout_idle_threads", Help: "Threads with a NATS subscription and no subscriber on this node (lingering)."}),
		IdleEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_idle_threads_ended_total",
			Help: "Lingering threads ended before the linger time because an idle bound was reached, by bound (tenant, total)."}, []string{"bound"}),
		QuotaRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_quota_refused_total",
			Help: "Streams refused over a tenant quota (429), by tenant (bounded: the rest as _other) and quota."}, []string{"tenant", "quota"}),
		Coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_coalesced_total",
			Help: "Subscriber backlogs consolidated by meaning past the high-water mark (--coalesce-bytes), by variant."}, []string{"variant"}),
		CoalescedSaved: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_coalesced_saved_bytes_total",
			Help: "Bytes taken out of subscriber queues by consolidation (queued before minus after), by variant."}, []string{"variant"}),
		Stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "threadcast_fanout_stage_seconds",
			Help:    "Where a frame's time goes in the fanout, by stage: transit (ingest sent it, by ingest's clock, to this node received it), deliver (received to written to a subscriber, per write, for the oldest frame written as it came; consolidated backlogs are not timed).",
			Buckets: wire.StageBuckets}, []string{"stage"}),
		Paced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_fanout_paced_total",
			Help: "Times a stream's writer held back because its client had more than --client-unread-bytes unread, by variant."}, []string{"variant"}),
		JoinWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "threadcast_fanout_join_wait_seconds",
			Help:    "How long a stream waited for one of the --max-joins slots before subscribing (0 when one was free).",
			Buckets: wire.StageBuckets}),
		Join: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "threadcast_fanout_join_seconds",
			Help:    "How long a stream took to join: from its request reaching the stream handler (authorization included) to its first write (the snapshot or catch-up that brings it live, or its opening when there was nothing to send), the wait for a join slot included. Streams that end first are not counted.",
			Buckets: wire.StageBuckets}),
	}
	m.stageTransit = m.Stage.WithLabelValues(StageTransit)
	m.stageDeliver = m.Stage.WithLabelValues(StageDeliver)
	// Create every label value up front, so dashboards see zeros, not gaps.
	for v := Variant(0); v < numVariants; v++ {
		m.Subscribers.WithLabelValues(v.String())
		m.delivered[v] = m.Delivered.WithLabelValues(v.String())
		m.BytesSent.WithLabelValues(v.String())
		m.coalesced[v] = m.Coalesced.WithLabelValues(v.String())
		m.coalescedSaved[v] = m.CoalescedSaved.WithLabelValues(v.String())
		m.paced[v] = m.Paced.WithLabelValues(v.String())
	}
	for _, r := range []string{ReasonOverflow, ReasonGap} {
		m.Drops.WithLabelValues(r)
	}
	for _, b := range []string{BoundTenant, BoundTotal} {
		m.IdleEnded.WithLabelValues(b)
	}
	for _, r := range []string{RetryBusy, RetryTimeout, RetryBehind, RetryLost} {
		m.SnapshotRetries.WithLabelValues(r)
	}
	for _, r := range []string{ReasonOverflow, ReasonGap, ReasonJoin, ReasonResume} {
		m.Resyncs.WithLabelValues(r)
	}
	for _, r := range []string{EndClient, EndLifetime, EndShutdown, EndWrite, EndResync, EndIdle, EndTokenExpired, EndSlow} {
		m.Ended.WithLabelValues(r)
	}
	m.collectors = []prometheus.Collector{m.Subscribers, m.Feeds, m.Frames, m.BadFrames, m.BadReplies, m.BadTap, m.Delivered, m.BytesSent,
		m.Resyncs, m.Drops, m.Snapshots, m.SnapshotRetries, m.Rejected, m.Latency, m.Ended, m.TapDropped, m.BogusCursors,
		m.IdleFeeds, m.IdleEnded, m.QuotaRefused, m.Coalesced, m.CoalescedSaved, m.Paced, m.Stage, m.JoinWait, m.Join}
	return m
}

// Register adds every metric to r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range m.collectors {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
