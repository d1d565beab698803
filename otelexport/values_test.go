package otelexport

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/threadcast/threadcast/pipeline"
)

// The model, provider and error.type values of one tenant's metrics are
// bounded (MaxAttrValues each, cut at MaxSpanString bytes): a tenant
// writing thousands of distinct long models does not fill the instruments
// and fold another tenant's series into the SDK's overflow set.
func TestMetricValuesBoundedPerTenant(t *testing.T) {
	h := newHarness(t, Config{})
	const n = 2000
	long := strings.Repeat("m", 4096)
	i64 := func(v int64) *int64 { return &v }
	runs := make([]*pipeline.RunSummary, 0, n+1)
	for i := range n {
		runs = append(runs, &pipeline.RunSummary{Tenant: "mallory", Thread: "t", RunID: "r" + strconv.Itoa(i),
			StartedAt: 1_000_000, EndedAt: 1_001_000, DurationMs: 1000, Outcome: "error", Code: strconv.Itoa(i) + long,
			Usage: []pipeline.Usage{{Provider: "p" + strconv.Itoa(i), Model: strconv.Itoa(i) + long, InputTokens: i64(1)}}})
	}
	runs = append(runs, &pipeline.RunSummary{Tenant: "acme", Thread: "t", RunID: "good", StartedAt: 1_000_000, EndedAt: 1_001_000,
		DurationMs: 1000, Outcome: "success", Usage: []pipeline.Usage{{Provider: "openai", Model: "gpt-x", InputTokens: i64(5)}}})
	h.export(t, n+1, runs...)
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	acme, longest, points := false, 0, 0
	malloryValues := map[string]map[string]bool{}
	note := func(tenant, key, v string) {
		if tenant != "mallory" {
			return
		}
		if malloryValues[key] == nil {
			malloryValues[key] = map[string]bool{}
		}
		malloryValues[key][v] = true
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []func(string) (string, bool)
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, func(k string) (string, bool) { v, ok := p.Attributes.Value(attribute.Key(k)); return v.AsString(), ok })
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, func(k string) (string, bool) { v, ok := p.Attributes.Value(attribute.Key(k)); return v.AsString(), ok })
				}
			}
			for _, get := range sets {
				points++
				tenant, _ := get(string(AttrTenant))
				if tenant == "acme" {
					acme = true
				}
				for _, k := range []string{string(AttrRequestModel), string(AttrProviderName), string(AttrErrorType)} {
					if v, ok := get(k); ok {
						longest = max(longest, len(v))
						note(tenant, k, v)
					}
				}
			}
		}
	}
	if !acme {
		t.Errorf("tenant acme has no series of its own among %d points", points)
	}
	if longest > pipeline.MaxSpanString {
		t.Errorf("a metric attribute holds %d bytes, over %d", longest, pipeline.MaxSpanString)
	}
	for k, vs := range malloryValues {
		if len(vs) != MaxAttrValues+1 || !vs[OtherValue] {
			t.Errorf("mallory's %s: %d values, want %d and %q", k, len(vs), MaxAttrValues+1, OtherValue)
		}
	}
	if len(malloryValues) != 3 {
		t.Errorf("mallory's bounded attributes: %d of 3 seen", len(malloryValues))
	}
}
