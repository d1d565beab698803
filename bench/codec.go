package main

// The codec against encoding/json decoding into equivalent structs, on the
// realistic mix of codec/testdata/mix.jsonl: codec/decode_bench_test.go's
// BenchmarkDecodeMixInterleaved alternates the two decoders in small
// slices, so that load from other processes on this shared machine hits
// both alike, and reports the ratio itself; BenchmarkDecodeTextContent
// checks the zero-allocation target.

import (
	"fmt"
	"text/tabwriter"
)

func init() {
	register(comparison{
		name:    "codec",
		summary: "codec vs encoding/json on the event mix (codec's own benchmarks)",
		run:     runCodec,
	})
}

func runCodec(e *env) error {
	benchtime, count := "1s", 5
	if e.quick {
		benchtime, count = "200ms", 1
	}
	lines, err := goBench("./codec", "^(BenchmarkDecodeMixInterleaved|BenchmarkDecodeTextContent)$", benchtime, count, "10m")
	if err != nil {
		return err
	}
	ratio, n := medianOf(lines, "BenchmarkDecodeMixInterleaved", "x-vs-std")
	ours, _ := medianOf(lines, "BenchmarkDecodeMixInterleaved", "codec-ns/event")
	std, _ := medianOf(lines, "BenchmarkDecodeMixInterleaved", "std-ns/event")
	allocs, na := medianOf(lines, "BenchmarkDecodeTextContent/impl=codec", "allocs/op")
	textNs, _ := medianOf(lines, "BenchmarkDecodeTextContent/impl=codec", "ns/op")
	if n == 0 || na == 0 {
		return fmt.Errorf("codec benchmarks did not report x-vs-std / allocs/op")
	}
	fmt.Fprintf(e.out, "\nCodec vs encoding/json (codec/testdata/mix.jsonl, interleaved, median of %d run(s))\n", n)
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tcodec ns/event\tencoding/json ns/event\tratio\ttarget\t")
	fmt.Fprintf(tw, "mix (validation on)\t%.0f\t%.0f\t%.1fx\t≥5x\t\n", ours, std, ratio)
	fmt.Fprintf(tw, "TEXT_MESSAGE_CONTENT\t%.0f\t-\tallocs/event %.0f\t0\t\n", textNs, allocs)
	if err := tw.Flush(); err != nil {
		return err
	}
	e.record(summaryRow{"codec", "events/s vs encoding/json (mix)", fmt.Sprintf("%.1fx", ratio), "≥5x", verdict(ratio, 5)})
	met := "yes"
	if allocs != 0 {
		met = "NO"
	}
	e.record(summaryRow{"codec", "allocs per TEXT_MESSAGE_CONTENT (warm)", fmt.Sprintf("%.0f", allocs), "0", met})
	return nil
}
