package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// loadReport is what the harness reads of the load test's report.json.
type loadReport struct {
	Start         time.Time      `json:"start"`
	EventsIn      uint64         `json:"eventsIn"`
	EventsPerSec  float64        `json:"eventsPerSec"`
	MsgsPerSec    float64        `json:"msgsPerSec"`
	Resyncs       uint64         `json:"resyncs"`
	Reconnects    uint64         `json:"reconnects"`
	Errors        uint64         `json:"errors"`
	PublishErrors uint64         `json:"publishErrors"`
	PublishCauses map[string]int `json:"publishErrorSamples,omitempty"`
	Events        []string       `json:"events"`
	Series        []struct {
		T       int    `json:"t"`
		MsgsOut uint64 `json:"msgsOut"`
	} `json:"series"`
	Check struct {
		Pass            bool     `json:"pass"`
		Settled         bool     `json:"settled"`
		Threads         int      `json:"threads"`
		ThreadsTainted  int      `json:"threadsTainted"`
		ThreadsMismatch int      `json:"threadsMismatch"`
		Subscribers     int      `json:"subscribers"`
		SubsChecked     int      `json:"subscribersChecked"`
		SubsMismatch    int      `json:"subscribersMismatch"`
		Gaps            uint64   `json:"gaps"`
		Duplicates      uint64   `json:"duplicates"`
		FoldErrors      uint64   `json:"foldErrors"`
		Failures        []string `json:"failures,omitempty"`
	} `json:"check"`
	Latency struct {
		P50 float64 `json:"p50Ms"`
		P99 float64 `json:"p99Ms"`
		Max float64 `json:"maxMs"`
	} `json:"latency"`
}

func readLoadReport(path string) (*loadReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r loadReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("chaos: %s: %w", path, err)
	}
	return &r, nil
}

// deliveries returns the load test's deliveries per second: bin k covers
// [start+k s, start+k+1 s).
func (r *loadReport) deliveries() []float64 {
	out := make([]float64, 0, len(r.Series))
	for _, s := range r.Series {
		for len(out) < s.T {
			out = append(out, 0)
		}
		out = append(out, float64(s.MsgsOut))
	}
	return out
}

// recovery fills f.Ready and f.Recover (doc.go has the definition): bins
// are deliveries per second from start, loadEnd the end of the load phase
// (no bin after it counts: the agents stopped).
func recovery(f *Fault, healthy time.Time, ok bool, start time.Time, bins []float64, loadEnd time.Time) {
	f.Ready, f.Recover, f.Service = -1, -1, -1
	// Baseline: the 5 whole bins that ended at or before the fault.
	lastBefore := int(math.Floor(f.At.Sub(start).Seconds())) - 1 // bin k ends at start+k+1
	var sum float64
	n := 0
	for k := lastBefore; k >= 0 && k > lastBefore-5 && k < len(bins); k-- {
		sum += bins[k]
		n++
	}
	if n > 0 {
		f.Baseline = sum / float64(n)
	}
	// back returns the end of the first bin from the one holding t whose
	// deliveries reach 90 % of the baseline, in seconds after the fault.
	back := func(t time.Time) float64 {
		for k := max(int(math.Floor(t.Sub(start).Seconds())), 0); k < len(bins); k++ {
			end := start.Add(time.Duration(k+1) * time.Second)
			if end.After(loadEnd) {
				return -1
			}
			if bins[k] >= 0.9*f.Baseline {
				return end.Sub(f.At).Seconds()
			}
		}
		return -1
	}
	if f.Baseline > 0 {
		f.Service = back(f.Undone)
	}
	if !ok || healthy.After(loadEnd) {
		return
	}
	f.Ready = healthy.Sub(f.At).Seconds()
	if f.Baseline == 0 {
		f.Recover = f.Ready // nothing to compare with: readiness alone
		return
	}
	f.Recover = back(healthy)
}

// KindStats summarises the faults of one kind, in seconds.
type KindStats struct {
	Kind        string  `json:"kind"`
	Count       int     `json:"count"`
	Unrecovered int     `json:"unrecovered"`
	ReadyP50    float64 `json:"readyP50"`
	ReadyMax    float64 `json:"readyMax"`
	ServiceP50  float64 `json:"serviceP50"`
	ServiceMax  float64 `json:"serviceMax"`
	P50         float64 `json:"recoverP50"`
	P99         float64 `json:"recoverP99"`
	Max         float64 `json:"recoverMax"`
}

// quantile is the nearest-rank quantile of sorted xs.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func kindStats(faults []*Fault) []KindStats {
	var out []KindStats
	for _, kind := range faultKinds {
		ks := KindStats{Kind: kind}
		var rec, ready, service []float64
		for _, f := range faults {
			if f.Kind != kind {
				continue
			}
			ks.Count++
			if f.Service >= 0 {
				service = append(service, f.Service)
			}
			if f.Recover < 0 {
				ks.Unrecovered++
				continue
			}
			rec, ready = append(rec, f.Recover), append(ready, f.Ready)
		}
		if ks.Count == 0 {
			continue
		}
		slices.Sort(rec)
		slices.Sort(ready)
		slices.Sort(service)
		ks.ServiceP50, ks.ServiceMax = quantile(service, 0.5), quantile(service, 1)
		ks.P50, ks.P99, ks.Max = quantile(rec, 0.5), quantile(rec, 0.99), quantile(rec, 1)
		ks.ReadyP50, ks.ReadyMax = quantile(ready, 0.5), quantile(ready, 1)
		out = append(out, ks)
	}
	return out
}

// Report is a finished chaos run, as report.json holds it.
type Report struct {
	Pass     bool           `json:"pass"`
	Verdict  []string       `json:"verdict"` // why it failed, or what passed
	Config   Config         `json:"config"`
	Start    time.Time      `json:"start"`
	Wall     float64        `json:"wallSeconds"`
	Faults   []*Fault       `json:"faults"`
	ByKind   []KindStats    `json:"byKind"`
	Exits    []string       `json:"unexpectedExits,omitempty"`
	Load     *loadReport    `json:"load,omitempty"`
	LoadExit int            `json:"loadtestExit"`
	Stream   *StreamCheck   `json:"stream,omitempty"`
	Restarts map[string]int `json:"starts"`
}

// verdict decides Pass from the load test's check and the stream check.
func (r *Report) verdict() {
	var bad []string
	if r.Load == nil {
		bad = append(bad, "no load test report")
	} else {
		c := r.Load.Check
		if !c.Pass {
			bad = append(bad, fmt.Sprintf("load test check failed: settled %v, %d threads tainted, %d REST views ≠ offline reduction of the acked events, %d of %d subscribers ≠ REST view, %d gaps, %d duplicates, %d fold errors",
				c.Settled, c.ThreadsTainted, c.ThreadsMismatch, c.SubsMismatch, c.SubsChecked, c.Gaps, c.Duplicates, c.FoldErrors))
		}
		if r.LoadExit != 0 {
			bad = append(bad, fmt.Sprintf("load test exited %d", r.LoadExit))
		}
	}
	if r.Stream == nil {
		bad = append(bad, "the stream was not checked")
	} else if s := r.Stream; s.Mismatched > 0 || s.DuplicateMessages > 0 || s.Threads == 0 {
		bad = append(bad, fmt.Sprintf("stream check failed: %d of %d threads' REST views ≠ offline reduction of the stored stream, %d messages stored twice",
			s.Mismatched, s.Threads, s.DuplicateMessages))
	}
	r.Pass = len(bad) == 0
	if r.Pass {
		c, s := r.Load.Check, r.Stream
		r.Verdict = []string{
			fmt.Sprintf("%d of %d threads: REST view = offline reduction of the stored stream (%d messages, %d events; none stored twice)", s.Matching, s.Threads, s.Messages, s.Events),
			fmt.Sprintf("load test: %d threads = offline reduction of the acked events (none tainted), %d of %d subscribers = REST view, 0 gaps, 0 duplicates, 0 fold errors", c.Threads, c.SubsChecked, c.Subscribers),
		}
	} else {
		r.Verdict = bad
	}
}

func fmtS(x float64) string {
	if x < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", x)
}

// markdown writes the report for people.
func (r *Report) markdown(w io.Writer) {
	v := "PASS"
	if !r.Pass {
		v = "FAIL"
	}
	fmt.Fprintf(w, "# Threadcast chaos run — %s\n\n", v)
	fmt.Fprintf(w, "Started %s, %.0f s wall; load %v (then settle), seed %d; 3 nats-server, 2 ingest (lease mode, TTL %v, %d partitions), 2 fanout, the load test (%d threads, %d subscribers, %.0f ev/s target).\n\n",
		r.Start.UTC().Format("2006-01-02 15:04:05 UTC"), r.Wall, r.Config.Duration, r.Config.Seed, r.Config.LeaseTTL, r.Config.Partitions, r.Config.Threads, r.Config.Subscribers, r.Config.Rate)
	for _, line := range r.Verdict {
		fmt.Fprintf(w, "- %s\n", line)
	}
	if l := r.Load; l != nil {
		fmt.Fprintf(w, "\nLoad: %d events in (%.0f/s), %.0f deliveries/s, latency p50 %.0f ms p99 %.0f ms max %.0f ms, %d resyncs, %d reconnects, %d connection errors, %d publish errors.\n",
			l.EventsIn, l.EventsPerSec, l.MsgsPerSec, l.Latency.P50, l.Latency.P99, l.Latency.Max, l.Resyncs, l.Reconnects, l.Errors, l.PublishErrors)
	}
	fmt.Fprintf(w, "\nTime to recover, seconds (from the fault to the end of the first second, once every process is ready and all %d leases are held, with deliveries ≥ 90%% of the 5 s before the fault):\n\n", r.Config.Partitions)
	fmt.Fprintln(w, "| fault | count | recover p50 | recover p99 | recover max | not recovered | ready p50 | ready max | deliveries back p50 | deliveries back max |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, k := range r.ByKind {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %d | %s | %s | %s | %s |\n", k.Kind, k.Count, fmtS(k.P50), fmtS(k.P99), fmtS(k.Max), k.Unrecovered,
			fmtS(k.ReadyP50), fmtS(k.ReadyMax), fmtS(k.ServiceP50), fmtS(k.ServiceMax))
	}
	fmt.Fprintln(w, "\n(ready: every probe 200 and every lease held; deliveries back: the first second after the fault was undone with deliveries ≥ 90 %, whatever the probes said.)")
	fmt.Fprint(w, "\nFaults:\n\n")
	fmt.Fprintln(w, "| # | at (s) | kind | target | down (s) | recover (s) | ready (s) | deliveries back (s) | baseline deliveries/s | last waited for |")
	fmt.Fprintln(w, "| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
	for i, f := range r.Faults {
		fmt.Fprintf(w, "| %d | %.1f | %s | %s | %.1f | %s | %s | %s | %.0f | %s |\n", i+1, f.At.Sub(r.Start).Seconds(), f.Kind, f.Target, f.Down,
			fmtS(f.Recover), fmtS(f.Ready), fmtS(f.Service), f.Baseline, strings.Join(f.Waited, ", "))
	}
	if l := r.Load; l != nil && len(l.PublishCauses) > 0 {
		fmt.Fprint(w, "\nPublish errors by cause (the SDK gave up after its retries):\n\n")
		for e, n := range l.PublishCauses {
			fmt.Fprintf(w, "- %d× %s\n", n, e)
		}
	}
	if len(r.Exits) > 0 {
		fmt.Fprint(w, "\nExits the harness did not cause (each restarted):\n\n")
		for _, e := range r.Exits {
			fmt.Fprintf(w, "- %s\n", e)
		}
	}
	if s := r.Stream; s != nil && len(s.Failures) > 0 {
		fmt.Fprint(w, "\nStream check failures:\n\n")
		for _, e := range s.Failures {
			fmt.Fprintf(w, "- %s\n", e)
		}
	}
	if l := r.Load; l != nil && len(l.Check.Failures) > 0 {
		fmt.Fprint(w, "\nLoad test check failures:\n\n")
		for _, e := range l.Check.Failures {
			fmt.Fprintf(w, "- %s\n", e)
		}
	}
}

// write writes report.json and report.md into dir and the markdown to w.
func (r *Report) write(dir string, w io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		return err
	}
	var md strings.Builder
	r.markdown(&md)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	_, err = io.WriteString(w, md.String())
	return err
}
