package main

// One node fanning out a busy thread to 1,000 and 5,000 SSE subscribers
// against a bare net/http SSE broadcaster writing the same bytes, as
// fanout/fanout_bench_test.go measures it (BenchmarkFanoutSSE: rounds
// alternate the servers on this shared machine; then both at 70% of the
// bare ceiling for latency).

import (
	"fmt"
	"text/tabwriter"
)

func init() {
	register(comparison{
		name:    "fanout",
		summary: "fanout vs a bare net/http SSE broadcaster (fanout's own benchmark)",
		run:     runFanout,
	})
}

func runFanout(e *env) error {
	n := "300x"
	if e.quick {
		n = "40x"
	}
	lines, err := goBench("./fanout", "^BenchmarkFanoutSSE$", n, 1, "30m")
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "\nFanout vs bare net/http SSE broadcaster (fanout benchmark, %s frames of 256 bytes, best round each)\n", n)
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "subscribers\tthreadcast deliv/s\tbare deliv/s\tratio\tnaive deliv/s\tp99 µs at 70%: threadcast\tbare\t")
	for _, subs := range []string{"1000", "5000"} {
		name := "BenchmarkFanoutSSE/subs=" + subs
		m := map[string]float64{}
		for _, l := range lines {
			if l.name == name {
				m = l.metrics
			}
		}
		if len(m) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t\n", subs)
			e.record(summaryRow{"fanout", "deliveries/s vs bare SSE, " + subs + " subs", "not reported", "≥70%", "-"})
			continue
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.0f\t\n", subs, m["tc_deliv/s"], m["bare_deliv/s"], m["ratio"],
			m["naive_deliv/s"], m["at70_tc_p99_µs"], m["at70_bare_p99_µs"])
		e.record(summaryRow{"fanout", "deliveries/s vs bare SSE, " + subs + " subs", fmt.Sprintf("%.0f%%", 100*m["ratio"]), "≥70%", verdict(m["ratio"], 0.7)})
		met := "yes"
		if m["at70_tc_p99_µs"] > m["at70_bare_p99_µs"] {
			met = "NO"
		}
		e.record(summaryRow{"fanout", "p99 at 70% of the ceiling, " + subs + " subs",
			fmt.Sprintf("%.1f ms (bare %.1f ms)", m["at70_tc_p99_µs"]/1000, m["at70_bare_p99_µs"]/1000), "≤ bare's", met})
	}
	return tw.Flush()
}
