package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/wire"
)

// Metrics are the pipeline's Prometheus collectors. Labels are bounded sets
// (event type, error kind, partition); thread and run ids never become labels.
// All fields are safe for concurrent use.
type Metrics struct {
	EventsIn       *prometheus.CounterVec // by AG-UI type
	eventsInByType [codec.NumTypes + 1]prometheus.Counter
	Messages       prometheus.Counter
	Rejected       *prometheus.CounterVec // decode/validation failures by kind
	Warnings       prometheus.Counter
	DeadLetters    *prometheus.CounterVec // by kind
	Skipped        prometheus.Counter     // replayed events at or below a checkpoint
	BatchMismatch  prometheus.Counter
	ApplySeconds   prometheus.Histogram
	// Stage is where an event's time goes on its way through ingest, by
	// stage (StagePublish, StageConsume, StageFrame).
	Stage           *prometheus.HistogramVec
	stagePublish    prometheus.Observer
	stageConsume    prometheus.Observer
	stageFrame      prometheus.Observer
	Frames          prometheus.Counter
	Checkpoints     prometheus.Counter
	CheckpointFails prometheus.Counter
	Evictions       prometheus.Counter
	Loads           prometheus.Counter
	HotThreads      prometheus.Gauge
	Snapshots       *prometheus.CounterVec // by result: hot, cold, miss, cached, window, page, coalesced, busy, error
	Runs            *prometheus.CounterVec // by outcome
	Lag             *prometheus.GaugeVec   // messages pending per partition
	AckPending      *prometheus.GaugeVec   // delivered, un-acked per partition
	QuotaShed       *prometheus.CounterVec // events shed over a tenant quota, by tenant (bounded by tenantLabels) and quota
	tenantLabels    *quota.TenantLabels
	PublishErrors   *prometheus.CounterVec // messages that could not be sent, by what: frame, snapshot, tap, dlq
	Parted          *prometheus.CounterVec // messages sent in parts (larger than one NATS message), by what
	ViewLimit       prometheus.Counter     // events refused because their thread's view reached MaxViewBytes
	TapPublished    *prometheus.CounterVec // durable tap publishes, by result: stored, duplicate, failed, unconfirmed (tap.go)
}

// NewMetrics creates the collectors and registers them on reg (nil: not
// registered, useful in tests and benchmarks).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns = "threadcast_ingest"
	m := &Metrics{
		EventsIn:      prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_total", Help: "Events accepted, by AG-UI type."}, []string{"type"}),
		Messages:      prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "messages_total", Help: "JetStream messages processed (one event or one batch each)."}),
		Rejected:      prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rejected_events_total", Help: "Events that failed decoding or validation, by kind."}, []string{"kind"}),
		Warnings:      prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "warnings_total", Help: "Warn-and-skip cases (codec stripping and reducer warnings)."}),
		DeadLetters:   prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "dead_letters_total", Help: "Messages published to the dead-letter subject, by kind."}, []string{"kind"}),
		Skipped:       prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "replay_skipped_total", Help: "Redelivered events skipped because a checkpoint already covers them."}),
		BatchMismatch: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "batch_count_mismatch_total", Help: "Batches whose Threadcast-Batch header disagrees with the lines found."}),
		ApplySeconds:  prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "apply_seconds", Help: "Time to decode and apply one message.", Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10)}),
		Stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "stage_seconds",
			Help:    "Where an event's time goes in ingest, by stage: publish (the event's own timestamp, the agent's clock in ms, to JetStream storing it), consume (stored to taken up by its shard), frame (taken up to its frame's publish).",
			Buckets: wire.StageBuckets}, []string{"stage"}),
		Frames:          prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "frames_total", Help: "View frames published."}),
		Checkpoints:     prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "checkpoints_total", Help: "Checkpoints written."}),
		CheckpointFails: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "checkpoint_failures_total", Help: "Checkpoint writes that failed (retried)."}),
		Evictions:       prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "evictions_total", Help: "Threads evicted to their checkpoint."}),
		Loads:           prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "checkpoint_loads_total", Help: "Threads loaded from a checkpoint."}),
		HotThreads:      prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "hot_threads", Help: "Threads held in memory."}),
		Snapshots:       prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "snapshot_requests_total", Help: "Snapshot requests answered, by result."}, []string{"result"}),
		Runs:            prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "runs_total", Help: "Runs ended, by outcome."}, []string{"outcome"}),
		Lag:             prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "partition_lag", Help: "Messages in the stream not yet delivered, per owned partition."}, []string{"partition"}),
		AckPending:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "partition_ack_pending", Help: "Delivered messages not yet acked, per owned partition."}, []string{"partition"}),
		QuotaShed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "quota_shed_events_total",
			Help: "Events not applied because their tenant was over a quota (dead-lettered), by tenant (the first 100, the rest as _other) and quota."}, []string{"tenant", "quota"}),
		tenantLabels:  quota.NewTenantLabels(quota.DefaultTenantLabels),
		PublishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "publish_errors_total", Help: "Core NATS messages that could not be sent, by what (frame, snapshot, tap, dlq)."}, []string{"what"}),
		ViewLimit:     prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "view_limit_rejections_total", Help: "Events refused (their run ended, dead-lettered) because their thread's view reached the largest view kept (--max-view-bytes)."}),
		TapPublished: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "tap_published_total",
			Help: "Tap messages published to the tap stream, by result: stored, duplicate (a run summary deduplicated), failed (refused or unacknowledged: maybe not stored), unconfirmed (sent without awaiting an ack: too many in flight)."}, []string{"result"}),
		Parted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "parted_messages_total", Help: "Messages larger than one NATS message, sent in parts, by what (frame, snapshot, tap, dlq)."}, []string{"what"}),
	}
	for t := 1; t <= codec.NumTypes; t++ {
		m.eventsInByType[t] = m.EventsIn.WithLabelValues(codec.Type(t).String())
	}
	m.eventsInByType[0] = m.EventsIn.WithLabelValues("UNKNOWN")
	m.stagePublish = m.Stage.WithLabelValues(StagePublish)
	m.stageConsume = m.Stage.WithLabelValues(StageConsume)
	m.stageFrame = m.Stage.WithLabelValues(StageFrame)
	if reg != nil {
		reg.MustRegister(m.EventsIn, m.Messages, m.Rejected, m.Warnings, m.DeadLetters, m.Skipped,
			m.BatchMismatch, m.ApplySeconds, m.Stage, m.Frames, m.Checkpoints, m.CheckpointFails, m.Evictions,
			m.Loads, m.HotThreads, m.Snapshots, m.Runs, m.Lag, m.AckPending, m.QuotaShed, m.PublishErrors, m.Parted, m.ViewLimit, m.TapPublished)
	}
	return m
}

// The stages of threadcast_ingest_stage_seconds.
const (
	StagePublish = "publish"
	StageConsume = "consume"
	StageFrame   = "frame"
)

// eventIn counts one accepted event without a label lookup.
func (m *Metrics) eventIn(t codec.Type) {
	if int(t) < len(m.eventsInByType) {
		m.eventsInByType[t].Inc()
	}
}
