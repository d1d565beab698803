package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/threadcast/threadcast/codec"
)

// workload is a set of threads, each an ordered list of raw events. The two
// workloads are the reference bench's (tools/oracle/bench.mjs),
// generated with the same seeds and options.
//
// The events' bytes are one buffer, and a thread's events are offsets into
// it: the workloads stay live for the whole run, and as 200,000 separately
// allocated slices they had the garbage collector find and mark 200,000
// objects in every cycle, a cost of the harness's storage charged to the
// pipeline being timed. A consumer reading from NATS holds an event's bytes
// only while it applies them.
type workload struct {
	name    string
	label   string // the prefix of bench.mjs's workload label
	buf     []byte
	threads [][]span
	events  int
	bytes   int // JSONL size
}

// span is one event's bytes: buf[off:end].
type span struct{ off, end int }

// event returns the bytes of s, capped so that nothing appends into the next.
func (w *workload) event(s span) []byte { return w.buf[s.off:s.end:s.end] }

// add appends one event to thread th (th == len(w.threads) starts a thread).
func (w *workload) add(th int, ev []byte) {
	if th == len(w.threads) {
		w.threads = append(w.threads, nil)
	}
	off := len(w.buf)
	w.buf = append(w.buf, ev...)
	w.threads[th] = append(w.threads[th], span{off, len(w.buf)})
}

// workloadSpecs are bench.mjs's SINGLE and THREADS, as gen.mjs arguments.
var workloadSpecs = []struct {
	name, label string
	args        []string
}{
	{"threads 1000x100", "threads 1000x100", []string{"threads", "--seed", "agui-bulk-threads-v1", "--threads", "1000", "--events", "100", "--verbosity", "1"}},
	{"single 100k", "single thread", []string{"random", "--seed", "agui-bulk-100k-v1", "--events", "100000", "--verbosity", "8", "--run-length", "200,1500"}},
}

// defaultOracle is the -oracle default: env (THREADCAST_ORACLE_DIR) when
// set, else the repository's tools/oracle when npm ci has installed the
// reference consumer there, else "" (the comparisons that need it are
// skipped, saying why).
func defaultOracle(env string) string {
	if env != "" {
		return env
	}
	dir := filepath.Join("tools", "oracle")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client", "package.json")); err != nil {
		return ""
	}
	return dir
}

// findGen returns streamgen's gen.mjs: beside the oracle (a copy of the
// whole tools folder), else the repository's, or "".
func findGen(oracleDir string) string {
	for _, p := range []string{
		filepath.Join(oracleDir, "..", "streamgen", "gen.mjs"),
		filepath.Join("tools", "streamgen", "gen.mjs"),
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// workloads generates (once) and returns both workloads.
func (e *env) workloads() ([]*workload, error) {
	var out []*workload
	for _, s := range workloadSpecs {
		if w := e.streams[s.name]; w != nil {
			out = append(out, w)
			continue
		}
		t0 := time.Now()
		cmd := exec.Command("node", append([]string{e.genPath}, s.args...)...)
		cmd.Stderr = os.Stderr
		raw, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("streamgen %v: %w", s.args, err)
		}
		w := &workload{name: s.name, label: s.label, bytes: len(raw), buf: make([]byte, 0, len(raw))}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 1<<30)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			if s.args[0] == "random" {
				w.add(0, line)
				continue
			}
			var th struct {
				Events []json.RawMessage `json:"events"`
			}
			if err := json.Unmarshal(line, &th); err != nil {
				return nil, fmt.Errorf("streamgen threads output: %w", err)
			}
			n := len(w.threads)
			for _, ev := range th.Events {
				w.add(n, ev)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
		for _, th := range w.threads {
			w.events += len(th)
		}
		if s.args[0] == "threads" {
			// Bytes as JSONL, one event per line, like the single stream.
			w.bytes = w.events + len(w.buf)
		}
		fmt.Fprintf(os.Stderr, "bench: generated %s: %d events, %.1f MB, in %v\n", w.name, w.events, float64(w.bytes)/1e6, time.Since(t0).Round(time.Millisecond))
		e.streams[s.name] = w
		out = append(out, w)
	}
	return out, nil
}

// decoded returns the workload's events decoded and cloned, per thread,
// each thread's Events in one slice. As 100,000 separately allocated
// 700-byte Events they were that many more objects for the collector to
// find and mark in every cycle of the apply-only runs, which read 3.0M
// events/s that way and 3.85M this way (interleaved, 2026-12-01):
// the harness's storage again, not the reducer.
func (w *workload) decoded() ([][]codec.Event, error) {
	var d codec.Decoder
	var ev codec.Event
	out := make([][]codec.Event, len(w.threads))
	for i, th := range w.threads {
		out[i] = make([]codec.Event, len(th))
		for j, sp := range th {
			if err := d.Decode(w.event(sp), &ev); err != nil {
				return nil, fmt.Errorf("thread %d event %d: %w", i, j, err)
			}
			out[i][j] = *ev.Clone()
		}
	}
	return out, nil
}
