package otelexport

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/threadcast/threadcast/pipeline"
)

func n(v int64) *int64 { return &v }

// sampleRun is a run with a tool call, a subagent spawned by it with a tool
// call of its own, a failed subagent, usage of two models, and a parent run.
func sampleRun() *pipeline.RunSummary {
	return &pipeline.RunSummary{
		Tenant: "acme", Thread: "th1", RunID: "r2", ParentRunID: "r1",
		StartSeq: 10, EndSeq: 30, StartedAt: 1_000_000, EndedAt: 1_005_000, DurationMs: 5000, Events: 21,
		Outcome: "error", Error: "provider said no: secret", Code: "UPSTREAM",
		Usage: []pipeline.Usage{
			{Provider: "openai", Model: "gpt-x", InputTokens: n(100), OutputTokens: n(20), CachedInputTokens: n(30)},
			{Provider: "openai", Model: "gpt-mini", InputTokens: n(7), CacheWriteInputTokens: n(3)},
		},
		InputTokens: 107, OutputTokens: 20,
		ToolCallSpans: []pipeline.ToolCallSpan{
			{ID: "c1", Name: "delegate", ParentMessageID: "m1", StartedAt: 1_001_000, EndedAt: 1_004_000, Result: true},
			{ID: "c2", Name: "search", SubagentRunID: "sa1", StartedAt: 1_002_000, EndedAt: 1_002_500, Error: "timeout: secret"},
		},
		SubagentSpans: []pipeline.SubagentSpan{
			{RunID: "sa1", Name: "researcher", ParentToolCallID: "c1", StartedAt: 1_001_500, EndedAt: 1_003_500, Outcome: "success"},
			{RunID: "sa2", Name: "writer", StartedAt: 1_004_000, EndedAt: 1_004_100, Outcome: "error", Error: "boom", Code: "E1"},
		},
	}
}

type harness struct {
	e      *Exporter
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	m      *Metrics
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader(), m: NewMetrics(nil)}
	var err error
	if h.e, err = newExporter(cfg, countedSpans{h.spans, h.m}, h.reader, h.m, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.e.Shutdown(context.Background()) })
	return h
}

// export hands runs to the exporter and waits until want of them are
// exported, then flushes the spans.
func (h *harness) export(t *testing.T, want int, runs ...*pipeline.RunSummary) tracetest.SpanStubs {
	t.Helper()
	for _, r := range runs {
		h.e.Run(r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(h.m.Runs.WithLabelValues("exported")) < float64(want) {
		if time.Now().After(deadline) {
			t.Fatalf("exported %v runs, want %d", testutil.ToFloat64(h.m.Runs.WithLabelValues("exported")), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.e.tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h.spans.GetSpans()
}

func attrs(kv []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, a := range kv {
		m[a.Key] = a.Value
	}
	return m
}

func byName(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(spans))
	return tracetest.SpanStub{}
}

// TestSpanMapping: the run, its subagents and tool calls become a tree of
// spans with the GenAI attributes, the run's own times, deterministic ids
// and no content by default.
func TestSpanMapping(t *testing.T) {
	h := newHarness(t, Config{AgentName: "planner"})
	spans := h.export(t, 1, sampleRun())
	if len(spans) != 5 {
		t.Fatalf("%d spans, want 5", len(spans))
	}
	run := byName(t, spans, "invoke_agent planner")
	tid := TraceID("acme", "th1", "r2")
	if run.SpanContext.TraceID() != tid || run.Parent.IsValid() {
		t.Errorf("run span trace %v parent %v", run.SpanContext.TraceID(), run.Parent)
	}
	if !run.StartTime.Equal(time.UnixMilli(1_000_000)) || !run.EndTime.Equal(time.UnixMilli(1_005_000)) {
		t.Errorf("run span times %v – %v", run.StartTime, run.EndTime)
	}
	a := attrs(run.Attributes)
	want := map[attribute.Key]any{
		AttrOperationName: "invoke_agent", AttrAgentName: "planner", AttrConversationID: "th1",
		AttrProviderName: "openai", AttrRequestModel: "gpt-x", AttrTenant: "acme", AttrRunID: "r2",
		AttrUsageInputTokens: int64(107), AttrUsageOutputTokens: int64(20),
		AttrUsageCacheReadTokens: int64(30), AttrUsageCacheCreationTokens: int64(3),
		AttrErrorType: "UPSTREAM", AttrRunOutcome: "error", AttrParentRunID: "r1",
	}
	for k, v := range want {
		if got := a[k].AsInterface(); got != v {
			t.Errorf("run %s = %v, want %v", k, got, v)
		}
	}
	if run.Status.Code != codes.Error || run.Status.Description != "UPSTREAM" {
		t.Errorf("run status %+v", run.Status)
	}
	if _, ok := a[AttrErrorMessage]; ok {
		t.Error("error message exported without Content")
	}
	ptid := TraceID("acme", "th1", "r1")
	if len(run.Links) != 1 || run.Links[0].SpanContext.TraceID() != ptid || run.Links[0].SpanContext.SpanID() != spanID(ptid, "run", "") {
		t.Errorf("run links %+v", run.Links)
	}

	delegate := byName(t, spans, "execute_tool delegate")
	researcher := byName(t, spans, "invoke_agent researcher")
	search := byName(t, spans, "execute_tool search")
	writer := byName(t, spans, "invoke_agent writer")
	parents := map[string][2]any{
		"delegate→run":          {delegate.Parent.SpanID(), run.SpanContext.SpanID()},
		"researcher→delegate":   {researcher.Parent.SpanID(), delegate.SpanContext.SpanID()},
		"search→researcher":     {search.Parent.SpanID(), researcher.SpanContext.SpanID()},
		"writer→run":            {writer.Parent.SpanID(), run.SpanContext.SpanID()},
		"search trace":          {search.SpanContext.TraceID(), tid},
		"delegate duration (s)": {delegate.EndTime.Sub(delegate.StartTime), 3 * time.Second},
	}
	for what, p := range parents {
		if p[0] != p[1] {
			t.Errorf("%s: %v, want %v", what, p[0], p[1])
		}
	}
	ta := attrs(delegate.Attributes)
	if ta[AttrOperationName].AsString() != "execute_tool" || ta[AttrToolName].AsString() != "delegate" || ta[AttrToolCallID].AsString() != "c1" {
		t.Errorf("tool attributes %v", delegate.Attributes)
	}
	if search.Status.Code != codes.Error || attrs(search.Attributes)[AttrErrorType].AsString() != ErrorTypeTool || search.Status.Description != ErrorTypeTool {
		t.Errorf("failed tool call status %+v", search.Status)
	}
	wa := attrs(writer.Attributes)
	if writer.Status.Code != codes.Error || wa[AttrErrorType].AsString() != "E1" || wa[AttrAgentName].AsString() != "writer" || wa[AttrAgentID].AsString() != "sa2" {
		t.Errorf("failed subagent %+v %v", writer.Status, writer.Attributes)
	}

	// The same run again: the same ids.
	again := h.export(t, 2, sampleRun())
	if len(again) != 10 || again[9].SpanContext.SpanID() != spans[4].SpanContext.SpanID() || again[9].SpanContext.TraceID() != tid {
		t.Errorf("replayed run's spans differ: %d spans", len(again))
	}

	// Metrics: token usage by type and model, duration with error.type.
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var durCount uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					tt, _ := p.Attributes.Value(AttrTokenType)
					model, _ := p.Attributes.Value(AttrRequestModel)
					got[m.Name+"/"+model.AsString()+"/"+tt.AsString()] = p.Sum
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if et, _ := p.Attributes.Value(AttrErrorType); m.Name == MetricOperationDuration && et.AsString() == "UPSTREAM" {
						durCount += p.Count
					}
				}
			}
		}
	}
	wantTokens := map[string]int64{
		MetricTokenUsage + "/gpt-x/input": 200, MetricTokenUsage + "/gpt-x/output": 40, MetricTokenUsage + "/gpt-mini/input": 14,
	}
	for k, v := range wantTokens {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(wantTokens) || durCount != 2 {
		t.Errorf("token points %v, duration count %d", got, durCount)
	}
}

// TestContentOptIn: with Content, the producers' error messages are
// exported.
func TestContentOptIn(t *testing.T) {
	h := newHarness(t, Config{Content: true})
	spans := h.export(t, 1, sampleRun())
	run := byName(t, spans, "invoke_agent")
	if run.Status.Description != "provider said no: secret" || attrs(run.Attributes)[AttrErrorMessage].AsString() != "provider said no: secret" {
		t.Errorf("run status %+v", run.Status)
	}
	if s := byName(t, spans, "execute_tool search"); s.Status.Description != "timeout: secret" {
		t.Errorf("tool status %+v", s.Status)
	}
}

// TestExcludedTenant: an excluded tenant's runs are counted, not exported.
func TestExcludedTenant(t *testing.T) {
	h := newHarness(t, Config{ExcludeTenants: []string{"acme"}})
	other := sampleRun()
	other.Tenant = "globex"
	spans := h.export(t, 1, sampleRun(), other)
	for _, s := range spans {
		if a := attrs(s.Attributes); a[AttrTenant].AsString() != "globex" {
			t.Errorf("span %q of tenant %v exported", s.Name, a[AttrTenant])
		}
	}
	if len(spans) != 5 || testutil.ToFloat64(h.m.Runs.WithLabelValues("excluded")) != 1 {
		t.Errorf("%d spans, %v excluded", len(spans), testutil.ToFloat64(h.m.Runs.WithLabelValues("excluded")))
	}
}

// TestRunNeverBlocks: with the exporter's goroutine stopped, Run drops
// and counts instead of waiting.
func TestRunNeverBlocks(t *testing.T) {
	h := newHarness(t, Config{RunQueue: 2})
	if err := h.e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for range 10 {
			h.e.Run(sampleRun())
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run blocked")
	}
	if got := testutil.ToFloat64(h.m.Runs.WithLabelValues("dropped")); got != 10 {
		t.Errorf("dropped %v, want 10", got)
	}
}

// TestBindFlags: the flag wins over OTEL_EXPORTER_OTLP_PROTOCOL, which
// wins over the default; an OTEL endpoint variable alone turns the export on.
func TestBindFlags(t *testing.T) {
	parse := func(args []string, env map[string]string) (Config, error) {
		c := DefaultConfig()
		fs := flagSet()
		finish := BindFlags(fs, &c)
		if err := fs.Parse(args); err != nil {
			return c, err
		}
		return c, finish(func(k string) string { return env[k] })
	}
	c, err := parse(nil, nil)
	if err != nil || c.Enabled || c.Protocol != "http" {
		t.Errorf("defaults: %+v %v", c, err)
	}
	c, err = parse(nil, map[string]string{EnvEndpoint: "http://x:4317", EnvProtocol: "grpc"})
	if err != nil || !c.Enabled || c.Protocol != "grpc" || c.Endpoint != "" {
		t.Errorf("from OTEL_*: %+v %v", c, err)
	}
	c, err = parse([]string{"--otlp-endpoint", "http://y:4318", "--otlp-protocol", "http", "--otlp-exclude-tenants", "a, b"}, map[string]string{EnvProtocol: "grpc"})
	if err != nil || !c.Enabled || c.Protocol != "http" || len(c.ExcludeTenants) != 2 || c.ExcludeTenants[1] != "b" {
		t.Errorf("flags: %+v %v", c, err)
	}
	if _, err = parse([]string{"--otlp-protocol", "thrift"}, nil); err == nil {
		t.Error("protocol thrift accepted")
	}
}

// TestShutdownReceiverDown: with nobody listening at the endpoint, Shutdown
// returns soon after its context ends, every run turned into spans.
func TestShutdownReceiverDown(t *testing.T) {
	for _, proto := range []string{"grpc", "http"} {
		m := NewMetrics(nil)
		e, err := NewWithMetrics(Config{Endpoint: "http://127.0.0.1:1", Protocol: proto, BatchTimeout: 10 * time.Millisecond}, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			e.Run(sampleRun())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		_ = e.Shutdown(ctx)
		cancel()
		if d := time.Since(start); d > ExportTimeout+5*time.Second {
			t.Errorf("%s: Shutdown took %v", proto, d)
		}
		if got := testutil.ToFloat64(m.Runs.WithLabelValues("exported")); got != 20 {
			t.Errorf("%s: %v runs turned into spans, want 20", proto, got)
		}
	}
}
