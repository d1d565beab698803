package main

// A noisy neighbour: tenant quiet's publish→delivery latency while tenant
// noisy is silent, at its events/s quota, and at ten times it on the bridge
// and on NATS, as node/noisy_test.go measures it (BenchmarkNoisyNeighbour:
// one node, the three levels in turn one second each, quiet's events timed
// apart by the level they were published at), with what quiet lost or
// duplicated and what of noisy's load was refused and shed.

import (
	"fmt"
	"text/tabwriter"
)

func init() {
	register(comparison{
		name:    "noisy",
		summary: "a tenant at 10x its quota against a quiet tenant's latency (node's own benchmark)",
		run:     runNoisy,
	})
}

func runNoisy(e *env) error {
	lines, err := goBench("./node", "^BenchmarkNoisyNeighbour$", "1x", 1, "30m")
	if err != nil {
		return err
	}
	m := lines[len(lines)-1].metrics
	fmt.Fprintln(e.out, "\nNoisy neighbour (node benchmark: 45 s, noisy silent / at its quota / at 10x in turn each second; quiet 400 events/s over 8 threads; noisy's quota 100 events/s, at 10x sending 1,000/s to the bridge and 1,000/s to NATS)")
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "quiet's latency, ms\tnoisy silent\tat quota\tat 10x\t10x / silent\t10x / at quota\t")
	fmt.Fprintf(tw, "p50\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", m["silent_p50_ms"], m["atquota_p50_ms"], m["loud_p50_ms"],
		m["loud_p50_ms"]/m["silent_p50_ms"], m["loud_p50_ms"]/m["atquota_p50_ms"])
	fmt.Fprintf(tw, "p99\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", m["silent_p99_ms"], m["atquota_p99_ms"], m["loud_p99_ms"],
		m["p99_loud_vs_silent"], m["p99_loud_vs_atquota"])
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "quiet lost %.0f, duplicated %.0f; noisy's bridge events %.0f sent, %.0f refused; NATS events %.0f sent, %.0f shed\n",
		m["b_lost"], m["b_dup"], m["a_bridge_sent"], m["a_bridge_refused"], m["a_nats_sent"], m["a_nats_shed"])
	for _, r := range []struct{ name, key string }{{"silent", "p99_loud_vs_silent"}, {"at its quota", "p99_loud_vs_atquota"}} {
		met := "yes"
		if m[r.key] > 1.10 {
			met = "NO"
		}
		e.record(summaryRow{"noisy", "quiet's p99, noisy at 10x / " + r.name, fmt.Sprintf("%.2f", m[r.key]), "≤1.10", met})
	}
	met := "yes"
	if m["b_lost"] != 0 || m["b_dup"] != 0 {
		met = "NO"
	}
	e.record(summaryRow{"noisy", "quiet's events lost / duplicated", fmt.Sprintf("%.0f / %.0f", m["b_lost"], m["b_dup"]), "0 / 0", met})
	return nil
}
