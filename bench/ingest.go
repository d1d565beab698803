package main

// The ingest path (publish → JetStream → decode → apply → checkpoint → frame)
// against raw JetStream publish+consume of the same bytes, as
// pipeline/ingest_bench_test.go measures them (BenchmarkIngest,
// BenchmarkRawJetStream, BenchmarkIngestPaced), one after the other in one
// go test process on the same kind of embedded server; and the cost of the
// analytics tap, live and durable (BenchmarkIngestTap), side by side with
// the tap off (BenchmarkIngest), as a ratio of events/s.

import (
	"fmt"
	"text/tabwriter"
)

func init() {
	register(comparison{
		name:    "ingest",
		summary: "ingest path vs raw JetStream (pipeline's own benchmarks)",
		run:     runIngest,
	})
}

func runIngest(e *env) error {
	n := "200000x"
	if e.quick {
		n = "20000x"
	}
	lines, err := goBench("./pipeline", "^(BenchmarkIngest|BenchmarkIngestTap|BenchmarkRawJetStream)$", n, 1, "30m")
	if err != nil {
		return err
	}
	get := func(name, metric string) float64 { v, _ := medianOf(lines, name, metric); return v }
	fmt.Fprintf(e.out, "\nIngest path vs raw JetStream (pipeline benchmarks, %s events, 1,000 threads)\n", n)
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "events/msg\tingest msgs/s\tingest events/s\tp50 ms\tp99 ms\traw msgs/s\traw events/s\tratio (msgs/s)\t")
	for _, b := range []string{"1", "32"} {
		in, raw := "BenchmarkIngest/batch="+b, "BenchmarkRawJetStream/batch="+b
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t%.2f\t\n", b, get(in, "msgs/s"), get(in, "events/s"),
			get(in, "p50-ms"), get(in, "p99-ms"), get(raw, "msgs/s"), get(raw, "events/s"), get(in, "msgs/s")/get(raw, "msgs/s"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "\nThe analytics tap's cost (events/s with the tap, over events/s with it off; durable: its run summaries kept in the tap stream, the default; durable-all: every tap message kept)\n")
	tw = tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "events/msg\toff events/s\tlive events/s\tratio\tdurable events/s\tratio\tvs live\tdurable-all events/s\tratio\t")
	for _, b := range []string{"1", "32"} {
		off := get("BenchmarkIngest/batch="+b, "events/s")
		tap := "BenchmarkIngestTap/batch=" + b + "/tap="
		live, durable, all := get(tap+"live", "events/s"), get(tap+"durable", "events/s"), get(tap+"durable-all", "events/s")
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.0f\t%.2f\t%.2f\t%.0f\t%.2f\t\n", b, off, live, live/off, durable, durable/off, durable/live, all, all/off)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	keep := get("BenchmarkIngestTap/batch=32/tap=durable", "events/s") / get("BenchmarkIngestTap/batch=32/tap=live", "events/s")
	e.record(summaryRow{"ingest", "events/s with the durable tap (summaries kept) vs the live tap, batched (32/msg)", fmt.Sprintf("%.0f%%", 100*keep), "≥95%", verdict(keep, 0.95)})
	tapCost := get("BenchmarkIngestTap/batch=32/tap=durable", "events/s") / get("BenchmarkIngest/batch=32", "events/s")
	e.record(summaryRow{"ingest", "events/s with the durable tap vs the tap off, batched (32/msg)", fmt.Sprintf("%.0f%%", 100*tapCost), "≥95%", verdict(tapCost, 0.95)})
	unb := get("BenchmarkIngest/batch=1", "msgs/s") / get("BenchmarkRawJetStream/batch=1", "msgs/s")
	e.record(summaryRow{"ingest", "msgs/s vs raw JetStream, unbatched", fmt.Sprintf("%.0f%%", 100*unb), "≥60%", verdict(unb, 0.6)})
	bat := get("BenchmarkIngest/batch=32", "events/s")
	e.record(summaryRow{"ingest", "events/s end to end, batched (32/msg)", fmt.Sprintf("%.0f", bat), "≥300,000", verdict(bat, 300000)})
	if e.quick {
		e.record(summaryRow{"ingest", "p99 at half load, batched", "not run (--quick)", "<50 ms", "-"})
		return nil
	}
	paced, err := goBench("./pipeline", "^BenchmarkIngestPaced$", "100000x", 1, "30m")
	if err != nil {
		return err
	}
	for _, l := range paced {
		fmt.Fprintf(e.out, "%s: %.0f events/s, p50 %.1f ms, p99 %.1f ms\n", l.name, l.metrics["events/s"], l.metrics["p50-ms"], l.metrics["p99-ms"])
		if l.name == "BenchmarkIngestPaced/batch=32/msgs-per-s=3500" {
			p99 := l.metrics["p99-ms"]
			met := "yes"
			if p99 >= 50 {
				met = "NO"
			}
			e.record(summaryRow{"ingest", "p99 at half load, batched (3,500 msgs/s of 32)", fmt.Sprintf("%.1f ms", p99), "<50 ms", met})
		}
	}
	return nil
}
