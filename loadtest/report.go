package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// writeReport writes report.md, chart.svg and report.json into dir.
func writeReport(dir string, res *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("loadtest: report: %w", err)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), js, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "chart.svg"), []byte(chartSVG(res)), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return err
	}
	writeMarkdown(f, res)
	return f.Close()
}

func writeMarkdown(w io.Writer, r *Result) {
	c := r.Config
	verdict := "PASS"
	if !r.Check.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "# Threadcast load test — %s — correctness %s\n\n", c.Scenario, verdict)
	fmt.Fprintf(w, "    %s\n\n", r.Command)
	target := c.Target
	switch {
	case target != "":
	case c.Embedded == "parts":
		target = "embedded in the load generator's process: two nodes (package node), NATS and the fanout in one, ingest alone in the other"
	default:
		target = "embedded in the load generator's process: package node, as `threadcast serve` runs it"
	}
	fmt.Fprintf(w, "Started %s; target %s.\n\n", r.Start.UTC().Format("2006-01-02 15:04:05 UTC"), target)
	fmt.Fprintf(w, "Machine: %d CPUs, load average %s at the end of the load phase; this process (load generator and any embedded system) used %.2f cores during it.\n\n", runtime.NumCPU(), r.LoadAvg, r.ProcessCores)
	fmt.Fprintf(w, "| setting | value |\n| --- | --- |\n")
	fmt.Fprintf(w, "| duration | %v (then up to %v to settle) |\n", c.Duration, c.Settle)
	fmt.Fprintf(w, "| tenants / threads / agents | %d / %d / %d |\n", c.Tenants, c.Threads, c.Agents)
	fmt.Fprintf(w, "| target rate | %.0f events/s (%s) |\n", c.Rate, c.scenario().doc)
	fmt.Fprintf(w, "| subscribers | %d: %s |\n", c.Subscribers, variantsLine(r.Subscribers))
	fmt.Fprintf(w, "| skew | %d hot threads share %.0f%% of the subscribers; the rest one by one over the other threads |\n\n", c.HotThreads, 100*c.HotFraction)

	fmt.Fprintf(w, "## Throughput\n\n| | total | per second (load phase) |\n| --- | ---: | ---: |\n")
	fmt.Fprintf(w, "| events in (published, accepted) | %d | %.0f |\n", r.EventsIn, r.EventsPerSec)
	fmt.Fprintf(w, "| messages out (SSE messages, WebSocket messages) | %d | %.0f |\n", r.MsgsOut, r.MsgsPerSec)
	fmt.Fprintf(w, "| bytes out | %d | %.2f MB/s |\n\n", r.BytesOut, r.BytesPerSec/1e6)

	fmt.Fprintf(w, "## End-to-end latency (publish → delivered to the subscriber)\n\n")
	fmt.Fprintf(w, "| | samples | p50 | p90 | p99 | p99.9 | max |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	row := func(name string, q Quantiles) {
		fmt.Fprintf(w, "| %s | %d | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f ms |\n", name, q.Count, q.P50, q.P90, q.P99, q.P999, q.Max)
	}
	row("all", r.Latency)
	names := make([]string, 0, len(r.ByVariant))
	for k := range r.ByVariant {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		row(k, r.ByVariant[k])
	}
	fmt.Fprintf(w, "\nOne sample per stored event per subscriber that received it live (not through a snapshot), "+
		"from the publish call to the frame that carried it (SSE and view payloads carry the stream seq; agui over "+
		"WebSocket has none, so it is measured per delivered content/delta event from its `timestamp`, 1 ms resolution). "+
		"Events published before the connection that delivered them opened (a reconnect's catch-up) and slow subscribers are not sampled. Log-linear histogram, ≤0.8%% relative error.\n\n")
	fmt.Fprintf(w, "![latency and throughput over time](chart.svg)\n\n")
	if len(r.Stages) > 0 {
		fmt.Fprintf(w, "### Where the time goes (the server's stage histograms)\n\n| stage | samples | p50 | p90 | p99 |\n| --- | ---: | ---: | ---: | ---: |\n")
		for _, s := range r.Stages {
			fmt.Fprintf(w, "| %s | %d | %.2f ms | %.2f ms | %.2f ms |\n", s.Stage, s.Count, s.P50, s.P90, s.P99)
		}
		fmt.Fprintf(w, "\nIngest publish: the event's `timestamp` (set by the load generator when it calls publish; 1 ms resolution) to JetStream storing it: "+
			"the SDK's linger and the store. Consume: stored to taken up by the shard. Frame: taken up to the frame's publish (the frame interval and the apply). "+
			"Fanout transit: the frame's publish to its receipt. Deliver: receipt to the write to a subscriber, per write (the oldest frame of the write). "+
			"Join slot and join are per subscriber connection, not per event: the wait for one of the fanout's --max-joins slots, and the whole join, "+
			"from the request reaching the stream handler to the first write (an event published while its subscriber joins reaches it no sooner). "+
			"What is left of the end-to-end figures is the client's side: the socket and its read. "+
			"Quantiles are interpolated within buckets that double from 100 µs, over the whole run (settle included); quantiles of stages do not add up.\n\n")
	}

	fmt.Fprintf(w, "## Disturbances\n\n| | count |\n| --- | ---: |\n")
	fmt.Fprintf(w, "| resyncs seen by subscribers (snapshots after the first) | %d |\n", r.Resyncs)
	fmt.Fprintf(w, "| catch-up deliveries (published before the delivering connection opened; not latency samples) | %d |\n", r.CatchUp)
	fmt.Fprintf(w, "| reconnects | %d |\n| errors (connect/read) | %d |\n| publish errors | %d |\n| fold warnings | %d |\n", r.Reconnects, r.Errors, r.PublishErrors, r.FoldWarnings)
	keys := make([]string, 0, len(r.ServerMetrics))
	for k := range r.ServerMetrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "| server `%s` | %.0f |\n", k, r.ServerMetrics[k])
	}
	if len(r.ErrorSamples) > 0 {
		fmt.Fprintf(w, "\nError samples:\n\n")
		for e, n := range r.ErrorSamples {
			fmt.Fprintf(w, "- %d× %s\n", n, e)
		}
	}
	if len(r.PublishErrorSamples) > 0 {
		fmt.Fprintf(w, "\nPublish errors by cause:\n\n")
		for e, n := range r.PublishErrorSamples {
			fmt.Fprintf(w, "- %d× %s\n", n, e)
		}
	}
	if len(r.StallTraces) > 0 {
		fmt.Fprintf(w, "\nExecution traces of stalled seconds (--trace-stalls; go tool trace): %s\n", strings.Join(r.StallTraces, ", "))
	}
	fmt.Fprintf(w, "\nTimeline:\n\n")
	for _, e := range r.Events {
		fmt.Fprintf(w, "    %s\n", e)
	}

	if len(r.Slow) > 0 {
		fmt.Fprintf(w, "\n## Slow subscribers\n\n| | |\n| --- | ---: |\n")
	}
	for _, mode := range []string{"agui", "view"} {
		o := r.Slow[mode]
		if o == nil {
			continue
		}
		fmt.Fprintf(w, "| %s: final view = REST view | %d of %d |\n", mode, o.Equal, o.Slow)
		fmt.Fprintf(w, "| %s: their resyncs / reconnects | %d / %d |\n", mode, o.Resyncs, o.Reconnects)
		if o.Paired > 0 && o.FastBytes > 0 && o.FastMsgs > 0 {
			fmt.Fprintf(w, "| %s: received by the %d with a fast subscriber of the same thread and mode: messages, slow / fast | %d / %.0f (%.2f×) |\n",
				mode, o.Paired, o.SlowMsgs, o.FastMsgs, float64(o.SlowMsgs)/o.FastMsgs)
			fmt.Fprintf(w, "| %s: the same, bytes, slow / fast | %d / %.0f (%.2f×) |\n", mode, o.SlowBytes, o.FastBytes, float64(o.SlowBytes)/o.FastBytes)
		}
	}

	k := r.Check
	fmt.Fprintf(w, "\n## Correctness: %s\n\n", verdict)
	fmt.Fprintf(w, "| check | result |\n| --- | --- |\n")
	fmt.Fprintf(w, "| settled (REST views at the last stored seq, subscribers caught up) | %v |\n", k.Settled)
	fmt.Fprintf(w, "| threads: REST view = offline reduction of what was stored | %d of %d equal (%d not checkable: a publish failed) |\n", k.Threads-k.ThreadsTainted-k.ThreadsMismatch, k.Threads, k.ThreadsTainted)
	fmt.Fprintf(w, "| subscribers: final view = REST view | %d of %d equal (%d never got a view) |\n", k.SubsChecked-k.SubsMismatch, k.SubsChecked, k.SubsNoView)
	fmt.Fprintf(w, "| gaps / duplicates / fold errors | %d / %d / %d |\n", k.Gaps, k.Duplicates, k.FoldErrors)
	if len(k.Failures) > 0 {
		fmt.Fprintf(w, "\nFirst failures:\n\n")
		for _, f := range k.Failures {
			fmt.Fprintf(w, "- %s\n", f)
		}
	}
	fmt.Fprintf(w, "\nRaw data: report.json (every figure above and the per-second series).\n")
}

func variantsLine(m map[string]int) string {
	var parts []string
	for _, v := range []variant{aguiSSE, viewSSE, aguiWS, viewWS} {
		parts = append(parts, fmt.Sprintf("%d %s", m[v.String()], v))
	}
	return strings.Join(parts, ", ")
}

// chartSVG draws two panels over time: latency p50/p99 (log scale) and
// events in / messages out per second.
func chartSVG(r *Result) string {
	const W, H, left, right, top, panel, gap = 900, 560, 70, 70, 30, 220, 60
	pw := float64(W - left - right)
	n := len(r.Series)
	if n < 2 {
		n = 2
	}
	x := func(i int) float64 { return left + pw*float64(i)/float64(n-1) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	// Latency panel, log10 scale of milliseconds.
	maxLat := 1.0
	minLat := math.Inf(1)
	for _, s := range r.Series {
		maxLat = math.Max(maxLat, s.P99)
		if s.P50 > 0 {
			minLat = math.Min(minLat, s.P50)
		}
	}
	lo := math.Floor(math.Log10(math.Max(math.Min(minLat, maxLat), 0.01)))
	hi := math.Ceil(math.Log10(maxLat))
	if hi <= lo {
		hi = lo + 1
	}
	yLat := func(ms float64) float64 {
		v := math.Log10(math.Max(ms, math.Pow(10, lo)))
		return top + panel - panel*(v-lo)/(hi-lo)
	}
	axes(&b, left, top, pw, panel, "latency (ms, log) — p50 blue, p99 red")
	for e := lo; e <= hi; e++ {
		y := yLat(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n",
			left, left+pw, y, y, left-6, y+4, math.Pow(10, e))
	}
	poly(&b, r.Series, x, func(s SecondOut) (float64, bool) { return yLat(s.P50), s.P50 > 0 }, "#1f77b4")
	poly(&b, r.Series, x, func(s SecondOut) (float64, bool) { return yLat(s.P99), s.P99 > 0 }, "#d62728")
	// Throughput panel.
	top2 := float64(top + panel + gap)
	var maxIn, maxOut float64 = 1, 1
	for _, s := range r.Series {
		maxIn = math.Max(maxIn, float64(s.EventsIn))
		maxOut = math.Max(maxOut, float64(s.MsgsOut))
	}
	axes(&b, left, int(top2), pw, panel, fmt.Sprintf("events in/s (green, left, max %.0f) — messages out/s (orange, right, max %.0f)", maxIn, maxOut))
	yIn := func(v float64) float64 { return top2 + panel - panel*v/maxIn }
	yOut := func(v float64) float64 { return top2 + panel - panel*v/maxOut }
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text><text x="%.1f" y="%.1f">%.0f</text>`+"\n",
			left-6, yIn(f*maxIn)+4, f*maxIn, left+pw+6, yOut(f*maxOut)+4, f*maxOut)
	}
	poly(&b, r.Series, x, func(s SecondOut) (float64, bool) { return yIn(float64(s.EventsIn)), true }, "#2ca02c")
	poly(&b, r.Series, x, func(s SecondOut) (float64, bool) { return yOut(float64(s.MsgsOut)), true }, "#ff7f0e")
	// Time axis and the end of the load phase.
	for i := 0; i < len(r.Series); i += max(1, len(r.Series)/10) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%ds</text>`+"\n", x(i), top2+panel+16, i)
	}
	if d := int(r.Config.Duration.Seconds()); d < len(r.Series) {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#888" stroke-dasharray="4 3"/><text x="%.1f" y="%d">load ends</text>`+"\n",
			x(d), x(d), top, top2+panel, x(d)+4, top+12)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func axes(b *strings.Builder, left, top int, pw float64, h int, title string) {
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="none" stroke="#444"/>`+"\n", left, top, pw, h)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", left, top-8, title)
}

func poly(b *strings.Builder, ss []SecondOut, x func(int) float64, y func(SecondOut) (float64, bool), color string) {
	b.WriteString(`<polyline fill="none" stroke-width="1.5" stroke="` + color + `" points="`)
	for i, s := range ss {
		if v, ok := y(s); ok {
			fmt.Fprintf(b, "%.1f,%.1f ", x(i), v)
		}
	}
	b.WriteString("\"/>\n")
}
