package main

// The ingest path with every run exported over OTLP (package otelexport, to
// a receiver on loopback that accepts and discards) against the same path
// with the export off: pipeline's BenchmarkIngestOTLP and BenchmarkIngest,
// alternating, the median of each.

import (
	"fmt"
	"text/tabwriter"
)

func init() {
	register(comparison{
		name:    "otlp",
		summary: "ingest with the OTLP export of runs on vs off (pipeline's own benchmarks)",
		run:     runOTLP,
	})
}

func runOTLP(e *env) error {
	n, count := "200000x", 3
	if e.quick {
		n, count = "20000x", 1
	}
	// Off and on alternate, one go test process each, so that a change in
	// the machine's other load weighs on both alike.
	var lines []benchLine
	for range count {
		for _, pattern := range []string{"^BenchmarkIngest$", "^BenchmarkIngestOTLP$"} {
			l, err := goBench("./pipeline", pattern, n, 1, "30m")
			if err != nil {
				return err
			}
			lines = append(lines, l...)
		}
	}
	get := func(name, metric string) float64 { v, _ := medianOf(lines, name, metric); return v }
	fmt.Fprintf(e.out, "\nIngest with the OTLP export on vs off (pipeline benchmarks, %s events, 1,000 threads, median of %d)\n", n, count)
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "events/msg\toff events/s\ton events/s\tratio\toff cpu-µs/event\ton cpu-µs/event\truns exported\truns dropped\t")
	for _, b := range []string{"1", "32"} {
		off, on := "BenchmarkIngest/batch="+b, "BenchmarkIngestOTLP/batch="+b
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.3f\t%.2f\t%.2f\t%.0f\t%.0f\t\n", b, get(off, "events/s"), get(on, "events/s"),
			get(on, "events/s")/get(off, "events/s"), get(off, "cpu-µs/event"), get(on, "cpu-µs/event"),
			get(on, "runs-exported"), get(on, "runs-dropped"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range []string{"1", "32"} {
		r := get("BenchmarkIngestOTLP/batch="+b, "events/s") / get("BenchmarkIngest/batch="+b, "events/s")
		e.record(summaryRow{"otlp", "events/s with OTLP export vs off, " + b + "/msg", fmt.Sprintf("%.1f%%", 100*r), "≥95%", verdict(r, 0.95)})
	}
	return nil
}
