package pipeline

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

// BenchOTLPSink is set by otlp_export_bench_test.go (package pipeline_test,
// which may import package otelexport): it returns the OTLP export to a
// local receiver as a RunSink, and a function reporting the runs it has
// exported and dropped so far. It is stopped by tb's cleanup.
var BenchOTLPSink func(tb testing.TB) (RunSink, func() (exported, dropped float64))

// BenchmarkIngestOTLP is BenchmarkIngest with every run exported over OTLP
// (an invoke_agent span and its metrics per run, over OTLP/HTTP to a
// receiver on loopback that accepts and discards), for the cost of the
// export on ingest throughput.
func BenchmarkIngestOTLP(b *testing.B) {
	if BenchOTLPSink == nil {
		b.Skip("no OTLP sink")
	}
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			msgs, events := benchLoad(b.N, batch)
			var stats func() (float64, float64)
			r := runIngestLoadWith(b, msgs, events, 0, tapOff, func(tb testing.TB, nc *nats.Conn, cfg Config) {
				cfg.Runs, stats = BenchOTLPSink(tb)
				startIngest(tb, nc, cfg)
			})
			r.report(b)
			exported, dropped := stats()
			b.ReportMetric(exported, "runs-exported")
			b.ReportMetric(dropped, "runs-dropped")
		})
	}
}
