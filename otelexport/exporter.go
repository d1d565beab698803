package otelexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/threadcast/threadcast/pipeline"
)

// Exporter turns run summaries into spans and metrics and exports them over
// OTLP. It is a pipeline.RunSink: Run only enqueues (or drops, counted); one
// goroutine of its own, stopped by Shutdown, builds the spans, which the
// SDK's batch span processor exports from its goroutine.
type Exporter struct {
	cfg     Config
	log     *slog.Logger
	exclude map[string]bool
	m       *Metrics

	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	mp     *sdkmetric.MeterProvider
	tokens metric.Int64Histogram
	dur    metric.Float64Histogram
	values *attrValues // the metrics' bounded attribute values

	queue    chan *pipeline.RunSummary
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// New builds the OTLP exporters of cfg.Protocol and starts the Exporter's
// goroutine. It connects to nothing yet (the exporters connect on their
// first export, and retry). reg receives the threadcast_otlp_* counters
// (nil: not registered).
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Exporter, error) {
	return NewWithMetrics(cfg, NewMetrics(reg), log)
}

// NewWithMetrics is New counting in m.
func NewWithMetrics(cfg Config, m *Metrics, log *slog.Logger) (*Exporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx := context.Background()
	var (
		se  sdktrace.SpanExporter
		me  sdkmetric.Exporter
		err error
	)
	if cfg.Protocol == "grpc" {
		var to []otlptracegrpc.Option
		var mo []otlpmetricgrpc.Option
		if u, ok := endpointURL(cfg.Endpoint); ok {
			to, mo = append(to, otlptracegrpc.WithEndpointURL(u)), append(mo, otlpmetricgrpc.WithEndpointURL(u))
		} else if cfg.Endpoint != "" {
			to, mo = append(to, otlptracegrpc.WithEndpoint(cfg.Endpoint)), append(mo, otlpmetricgrpc.WithEndpoint(cfg.Endpoint))
		}
		if se, err = otlptracegrpc.New(ctx, to...); err == nil {
			me, err = otlpmetricgrpc.New(ctx, mo...)
		}
	} else {
		var to []otlptracehttp.Option
		var mo []otlpmetrichttp.Option
		if u, ok := endpointURL(cfg.Endpoint); ok {
			to = append(to, otlptracehttp.WithEndpointURL(signalURL(u, "/v1/traces")))
			mo = append(mo, otlpmetrichttp.WithEndpointURL(signalURL(u, "/v1/metrics")))
		} else if cfg.Endpoint != "" {
			to, mo = append(to, otlptracehttp.WithEndpoint(cfg.Endpoint)), append(mo, otlpmetrichttp.WithEndpoint(cfg.Endpoint))
		}
		if se, err = otlptracehttp.New(ctx, to...); err == nil {
			me, err = otlpmetrichttp.New(ctx, mo...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("otelexport: %w", err)
	}
	var ro []sdkmetric.PeriodicReaderOption
	if cfg.MetricInterval > 0 {
		ro = append(ro, sdkmetric.WithInterval(cfg.MetricInterval))
	}
	reader := sdkmetric.NewPeriodicReader(countedMetrics{me, m}, ro...)
	return newExporter(cfg, countedSpans{se, m}, reader, m, log)
}

// newExporter assembles an Exporter over span exporter se and metric reader
// reader (tests pass in-memory ones).
func newExporter(cfg Config, se sdktrace.SpanExporter, reader sdkmetric.Reader, m *Metrics, log *slog.Logger) (*Exporter, error) {
	if log == nil {
		log = slog.Default()
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	if cfg.RunQueue <= 0 {
		cfg.RunQueue = DefaultConfig().RunQueue
	}
	name := cfg.ServiceName
	if name == "" {
		name = DefaultConfig().ServiceName
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// over the configured name.
	res, err := resource.New(context.Background(),
		resource.WithAttributes(semconv.ServiceName(name)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("otelexport: resource: %w", err)
	}
	// The batch processor blocks the Exporter's own goroutine when its
	// queue is full, so that back-pressure ends at the run queue, where a
	// dropped run is counted.
	bo := []sdktrace.BatchSpanProcessorOption{sdktrace.WithBlocking(), sdktrace.WithExportTimeout(ExportTimeout)}
	if cfg.SpanQueue > 0 {
		bo = append(bo, sdktrace.WithMaxQueueSize(cfg.SpanQueue))
	}
	if cfg.BatchTimeout > 0 {
		bo = append(bo, sdktrace.WithBatchTimeout(cfg.BatchTimeout))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(contextIDs{}),
		sdktrace.WithBatcher(se, bo...))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader))
	meter := mp.Meter(scope)
	tokens, err := meter.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864))
	if err != nil {
		return nil, err
	}
	dur, err := meter.Float64Histogram(MetricOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration: one agent run."),
		metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92))
	if err != nil {
		return nil, err
	}
	e := &Exporter{
		cfg: cfg, log: log, exclude: map[string]bool{}, m: m,
		tp: tp, tracer: tp.Tracer(scope), mp: mp, tokens: tokens, dur: dur, values: newAttrValues(MaxAttrValues),
		queue: make(chan *pipeline.RunSummary, cfg.RunQueue),
		stop:  make(chan struct{}), done: make(chan struct{}),
	}
	for _, t := range cfg.ExcludeTenants {
		e.exclude[t] = true
	}
	go e.loop()
	return e, nil
}

// scope is the instrumentation scope of the spans and metrics.
const scope = "github.com/threadcast/threadcast/otelexport"

// Run enqueues s (pipeline.RunSink): never blocks; a run of an excluded
// tenant, or arriving with the queue full or after Shutdown, is counted
// and dropped.
func (e *Exporter) Run(s *pipeline.RunSummary) {
	if e.exclude[s.Tenant] {
		e.m.Runs.WithLabelValues("excluded").Inc()
		return
	}
	select {
	case <-e.stop:
		e.m.Runs.WithLabelValues("dropped").Inc()
		return
	default:
	}
	select {
	case e.queue <- s:
	default:
		e.m.Runs.WithLabelValues("dropped").Inc()
	}
}

func (e *Exporter) loop() {
	defer close(e.done)
	for {
		select {
		case s := <-e.queue:
			e.export(s)
		case <-e.stop:
			for {
				select {
				case s := <-e.queue:
					e.export(s)
				default:
					return
				}
			}
		}
	}
}

func (e *Exporter) export(s *pipeline.RunSummary) {
	e.record(s)
	e.m.Runs.WithLabelValues("exported").Inc()
}

// Shutdown stops the Exporter's goroutine once it has turned the queued
// runs into spans (or ctx ends), then flushes and shuts the span and metric
// exporters down within ctx, and waits for the goroutine: past ctx, the
// span processor refuses spans, so it ends once the processor's last
// export returns (each bounded by ExportTimeout). Call it once ingest has
// stopped handing it runs.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() { close(e.stop) })
	select {
	case <-e.done:
	case <-ctx.Done():
	}
	err := errors.Join(e.tp.Shutdown(ctx), e.mp.Shutdown(ctx))
	<-e.done
	return err
}

// ExportTimeout bounds one export of a batch of spans.
const ExportTimeout = 10 * time.Second

// endpointURL reports whether endpoint is a URL (has a scheme).
func endpointURL(endpoint string) (string, bool) {
	return endpoint, strings.Contains(endpoint, "://")
}

// signalURL appends path to u when u has none.
func signalURL(u, path string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Path != "" && p.Path != "/") {
		return u
	}
	p.Path = path
	return p.String()
}

// contextIDs is the tracer provider's IDGenerator: the ids of a span are
// those record put in its start context (deterministic, from the run's
// tenant, thread and run id).
type contextIDs struct{}

type idsKey struct{}

type spanIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

func (contextIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	ids, _ := ctx.Value(idsKey{}).(spanIDs)
	return ids.trace, ids.span
}

func (contextIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	ids, _ := ctx.Value(idsKey{}).(spanIDs)
	return ids.span
}

// countedSpans counts the span exporter's failures.
type countedSpans struct {
	sdktrace.SpanExporter
	m *Metrics
}

func (c countedSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		c.m.Failures.WithLabelValues("traces").Inc()
		c.m.Spans.WithLabelValues("failed").Add(float64(len(spans)))
	} else {
		c.m.Spans.WithLabelValues("exported").Add(float64(len(spans)))
	}
	return err
}

// countedMetrics counts the metric exporter's failures.
type countedMetrics struct {
	sdkmetric.Exporter
	m *Metrics
}

func (c countedMetrics) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := c.Exporter.Export(ctx, rm)
	if err != nil {
		c.m.Failures.WithLabelValues("metrics").Inc()
	}
	return err
}

// Metrics are the export's Prometheus counters; their labels are fixed sets.
type Metrics struct {
	Runs     *prometheus.CounterVec // by result: exported, dropped (queue full), excluded (tenant)
	Spans    *prometheus.CounterVec // by result: exported, failed
	Failures *prometheus.CounterVec // failed OTLP exports, by signal: traces, metrics
}

// NewMetrics creates the counters and registers them on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns = "threadcast_otlp"
	m := &Metrics{
		Runs:     prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "runs_total", Help: "Run summaries handed to the OTLP export, by result: exported, dropped (queue full), excluded (tenant)."}, []string{"result"}),
		Spans:    prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "spans_total", Help: "Spans sent over OTLP, by result: exported, failed."}, []string{"result"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "export_failures_total", Help: "OTLP exports that failed, by signal: traces, metrics."}, []string{"signal"}),
	}
	for _, r := range []string{"exported", "dropped", "excluded"} {
		m.Runs.WithLabelValues(r)
	}
	for _, r := range []string{"exported", "failed"} {
		m.Spans.WithLabelValues(r)
	}
	for _, s := range []string{"traces", "metrics"} {
		m.Failures.WithLabelValues(s)
	}
	if reg != nil {
		reg.MustRegister(m.Runs, m.Spans, m.Failures)
	}
	return m
}
