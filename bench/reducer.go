package main

// The reducer against the reference consumer's own benchmark (bench.mjs):
// events per second on the same two workloads, in the two pipelines each
// side has — the whole consumer (bytes to view: our codec + reducer; the
// reference's enforcement, chunk expansion, verification and reducer) and
// the reducer alone on already decoded/expanded events.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
)

func init() {
	register(comparison{
		name:    "reducer",
		summary: "reducer throughput vs the reference consumer (bench.mjs)",
		run:     runReducer,
	})
}

// refRate is one line of bench.mjs's output.
type refRate struct {
	rate float64
	runs int
}

// measurement is one side's result on one workload and pipeline.
type measurement struct {
	eventsPerSec   float64
	allocsPerEvent float64
}

func runReducer(e *env) error {
	ws, err := e.workloads()
	if err != nil {
		return err
	}
	ref, err := e.referenceRates()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(e.out, "\nReducer vs reference consumer (@ag-ui/client 1.0.0 bench.mjs), Go %s, GOMAXPROCS=%d, %d CPU(s) usable, median of %d run(s), load average %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), e.runs, loadAverage())
	if runtime.NumCPU() > 1 {
		// NumCPU counts the CPUs of the process's affinity mask, which
		// bench.mjs inherits: under taskset both sides get one core, as
		// the targets of #3 are stated.
		fmt.Fprintln(e.out, "note: #3's targets are on one core; run under `taskset -c 0` to hold both sides to one")
	}
	fmt.Fprintln(tw, "workload\tpipeline\tevents\tthreadcast ev/s\tallocs/ev\treference ev/s\t(runs)\tratio\ttarget\t")
	for _, w := range ws {
		target := "100x"
		if len(w.threads) == 1 {
			target = "1000x"
		}
		full := median(e.runs, func() (measurement, error) { return fullPipeline(w, nil) })
		var heldViews medianResult
		if len(w.threads) > 1 {
			held := make([]*reducer.Thread, len(w.threads))
			heldViews = median(e.runs, func() (measurement, error) { return fullPipeline(w, held) })
			clear(held)
		}
		// Decoded only now: its pointer-rich events, live during the
		// decode+apply runs, would have the GC mark them every cycle and
		// charge that to the pipeline that never reads them.
		decoded, err := w.decoded()
		if err != nil {
			return err
		}
		only := median(e.runs, func() (measurement, error) { return applyOnly(decoded, w.events) })
		// Only decode+apply is judged. It is the consumer against the
		// consumer, the figures #3 quotes for the reference ("about 400
		// events/s on the long thread and 32,000 events/s on the short
		// ones" are bench.mjs's client pipeline; its reducer-only runs at
		// twice that). The other rows are printed against their nearest
		// reference figure to show where the time goes, not as targets.
		type tableRow struct {
			pipeline, refKey string
			m                measurement
			err              error
			unjudged         string // why the summary judges the row against no target
		}
		rows := []tableRow{{"decode+apply", "client pipeline", full.m, full.err, ""}}
		if len(w.threads) > 1 {
			rows = append(rows, tableRow{"decode+apply, views held", "client pipeline", heldViews.m, heldViews.err, "- (no like-for-like reference)"})
		}
		rows = append(rows, tableRow{"apply only", "reducer only", only.m, only.err, "- (diagnostic; #3 quotes the client pipeline)"})
		for _, row := range rows {
			if row.err != nil {
				return fmt.Errorf("%s %s: %w", w.name, row.pipeline, row.err)
			}
			r := ref[w.label+"/"+row.refKey]
			ratio, refS, runs := "-", "-", "-"
			if r.rate > 0 {
				refS = fmt.Sprintf("%.0f", r.rate)
				runs = fmt.Sprint(r.runs)
				ratio = fmt.Sprintf("%.0fx", row.m.eventsPerSec/r.rate)
			}
			rowTarget := target
			if row.unjudged != "" {
				rowTarget = "-"
			}
			fmt.Fprintf(tw, "%s\t%s vs %s\t%d\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t\n", w.name, row.pipeline, row.refKey, w.events,
				row.m.eventsPerSec, row.m.allocsPerEvent, refS, runs, ratio, rowTarget)
			met, goal := "-", "≥"+target
			switch {
			case row.unjudged != "":
				goal = row.unjudged
			case r.rate > 0:
				met = verdict(row.m.eventsPerSec/r.rate, map[string]float64{"100x": 100, "1000x": 1000}[target])
			}
			e.record(summaryRow{"reducer", w.name + ", " + row.pipeline + " vs " + row.refKey, ratio, goal, met})
		}
	}
	return tw.Flush()
}

type medianResult struct {
	m   measurement
	err error
}

// median runs f n times (after one warm-up run) and returns the run with
// the median rate.
func median(n int, f func() (measurement, error)) medianResult {
	if _, err := f(); err != nil {
		return medianResult{err: err}
	}
	ms := make([]measurement, 0, n)
	for i := 0; i < n; i++ {
		m, err := f()
		if err != nil {
			return medianResult{err: err}
		}
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].eventsPerSec < ms[j].eventsPerSec })
	return medianResult{m: ms[len(ms)/2]}
}

// measure times f, which processes events events, and counts its
// allocations. f is repeated back to back for at least minPasses passes
// and minMeasure of time, so that the garbage collector's cost is in the
// rate as it is in steady state: a single pass right after a forced GC
// allocates less than the heap goal and would run with no collection at
// all, which no long-running consumer gets.
func measure(events int, f func() error) (measurement, error) {
	const (
		minPasses  = 3
		minMeasure = time.Second
	)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	passes := 0
	for passes < minPasses || time.Since(t0) < minMeasure {
		if err := f(); err != nil {
			return measurement{}, err
		}
		passes++
	}
	d := time.Since(t0)
	runtime.ReadMemStats(&after)
	n := float64(passes * events)
	return measurement{
		eventsPerSec:   n / d.Seconds(),
		allocsPerEvent: float64(after.Mallocs-before.Mallocs) / n,
	}, nil
}

// fullPipeline decodes every event from its bytes and applies it, one
// Thread per thread, as the ingest shard does. With held non-nil (one slot
// per thread) each finished view replaces the previous pass's view of the
// same thread, so that the heap holds every thread's view throughout, as a
// shard serving that many threads does, and the collector marks them in
// every cycle.
func fullPipeline(w *workload, held []*reducer.Thread) (measurement, error) {
	return measure(w.events, func() error {
		var d codec.Decoder
		var ev codec.Event
		for i, th := range w.threads {
			t := reducer.NewThread("bench")
			for j, sp := range th {
				if err := d.Decode(w.event(sp), &ev); err != nil {
					return fmt.Errorf("thread %d event %d: %w", i, j, err)
				}
				if res := t.Apply(uint64(j)+1, &ev); res.Fatal != nil || len(res.Warnings) > 0 {
					return fmt.Errorf("thread %d event %d: not clean: %v %v", i, j, res.Fatal, res.Warnings)
				}
			}
			if held != nil {
				held[i] = t
			}
		}
		return nil
	})
}

// applyOnly applies already decoded events.
func applyOnly(threads [][]codec.Event, events int) (measurement, error) {
	return measure(events, func() error {
		for i, th := range threads {
			t := reducer.NewThread("bench")
			for j := range th {
				if res := t.Apply(uint64(j)+1, &th[j]); res.Fatal != nil {
					return fmt.Errorf("thread %d event %d: %v", i, j, res.Fatal)
				}
			}
		}
		return nil
	})
}

// referenceRates runs the reference's bench.mjs (or reads its saved output)
// and returns its median events/s (and number of runs) keyed
// "<workload label>/<pipeline>".
func (e *env) referenceRates() (map[string]refRate, error) {
	var out []byte
	if e.refJSON != "" {
		b, err := os.ReadFile(e.refJSON)
		if err != nil {
			return nil, err
		}
		out = b
	} else {
		fmt.Fprintf(os.Stderr, "bench: running the reference's bench.mjs (%d run(s)); the 100k-event thread takes minutes\n", e.refRuns)
		cmd := exec.Command("node", "bench.mjs", "--runs", fmt.Sprint(e.refRuns))
		cmd.Dir = e.oracleDir
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("bench.mjs: %w", err)
		}
		out = b
	}
	rates := map[string]refRate{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var line struct {
			Workload string  `json:"workload"`
			Rate     float64 `json:"medianEventsPerSecond"`
			Runs     int     `json:"runs"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Workload == "" {
			continue
		}
		// "single thread 100000 events / client pipeline" -> "single thread/client pipeline"
		label, pipeline, ok := strings.Cut(line.Workload, " / ")
		if !ok {
			continue
		}
		for _, s := range workloadSpecs {
			if strings.HasPrefix(label, s.label) {
				rates[s.label+"/"+pipeline] = refRate{line.Rate, line.Runs}
			}
		}
	}
	return rates, nil
}

// loadAverage returns the 1-minute load average ("?" where /proc has none):
// a busy machine slows the reference more than it slows us (README.md).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
