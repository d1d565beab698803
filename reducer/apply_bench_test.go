package reducer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/threadcast/threadcast/codec"
)

// Apply throughput on streamgen streams (testdata/bench/README.md says how
// they were made). Events are decoded and cloned before the timer starts, so
// the Apply benchmarks measure the reducer alone; the DecodeApply ones add
// the codec, as the pipeline pays it. The baseline is what any Go consumer
// pays at least per event with the standard library: encoding/json into a
// map, no reduction at all.
//
//	go test -run '^$' -bench . -benchtime 5x ./reducer

// benchFixtures are loaded once per binary, each set only when a benchmark
// needs it, so that one benchmark's heap does not carry the other's fixtures
// (the GC's marking of them would be charged to the benchmark).
var benchFixtures struct {
	longOnce, shortOnce sync.Once
	long                [][]byte // raw events of the 100k-event thread
	longEv              []*codec.Event
	short               [][][]byte // raw events of 1,000 threads (decoded per benchmark: shortDecoded)
	shortIDs            []string
	loadFailed          error
}

func loadBenchFixtures(b *testing.B) {
	b.Helper()
	f := &benchFixtures
	f.longOnce.Do(func() {
		lines, err := gunzipLines("testdata/bench/long-100k.jsonl.gz")
		if err != nil {
			f.loadFailed = err
			return
		}
		f.long, f.longEv = lines, decodeAll(lines)
	})
	if f.loadFailed != nil {
		b.Fatal(f.loadFailed)
	}
}

func loadShortFixtures(b *testing.B) {
	b.Helper()
	f := &benchFixtures
	f.shortOnce.Do(func() {
		threads, err := gunzipLines("testdata/bench/short-1000x100.jsonl.gz")
		if err != nil {
			f.loadFailed = err
			return
		}
		for _, line := range threads {
			var th struct {
				ThreadID string            `json:"threadId"`
				Events   []json.RawMessage `json:"events"`
			}
			if err := json.Unmarshal(line, &th); err != nil {
				f.loadFailed = err
				return
			}
			// One buffer per thread rather than an allocation per event:
			// 100,000 small objects, live for the whole binary, would be
			// marked in every GC cycle and charged to the benchmark
			// being timed (bench/workloads.go does the same).
			n := 0
			for _, e := range th.Events {
				n += len(e)
			}
			buf := make([]byte, 0, n)
			raws := make([][]byte, len(th.Events))
			for i, e := range th.Events {
				off := len(buf)
				buf = append(buf, e...)
				raws[i] = buf[off:len(buf):len(buf)]
			}
			f.short = append(f.short, raws)
			f.shortIDs = append(f.shortIDs, th.ThreadID)
		}
	})
	if f.loadFailed != nil {
		b.Fatal(f.loadFailed)
	}
}

// shortDecoded returns the 1,000 short threads decoded and cloned. Each
// benchmark that applies decoded events decodes its own copy and drops it
// when it returns: 100,000 events full of pointers, kept in the heap of the
// benchmarks that decode from bytes, would have the GC mark them on every
// cycle and charge that to the codec and reducer.
func shortDecoded(b *testing.B) [][]*codec.Event {
	b.Helper()
	loadShortFixtures(b)
	out := make([][]*codec.Event, len(benchFixtures.short))
	for i, raws := range benchFixtures.short {
		out[i] = decodeAll(raws)
	}
	return out
}

func gunzipLines(path string) ([][]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			out = append(out, append([]byte(nil), sc.Bytes()...))
		}
	}
	return out, sc.Err()
}

func decodeAll(raws [][]byte) []*codec.Event {
	var dec codec.Decoder
	var ev codec.Event
	out := make([]*codec.Event, 0, len(raws))
	for _, raw := range raws {
		if err := dec.Decode(raw, &ev); err != nil {
			continue
		}
		out = append(out, ev.Clone())
	}
	return out
}

// reportRate adds events/s, ns/event and allocs/event to the result, and
// cpu-ns/event: the process's CPU time (GC workers included) per event,
// which stays meaningful when other work shares the machine's cores and
// wall-clock rates do not.
func reportRate(b *testing.B, events int, elapsed time.Duration, mallocs uint64) {
	total := float64(events) * float64(b.N)
	b.ReportMetric(total/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/total, "ns/event")
	b.ReportMetric(float64(mallocs)/total, "allocs/event")
	if cpu := cpuTime() - benchCPUStart; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/total, "cpu-ns/event")
	}
}

// benchCPUStart is set by startCPU; benchmarks run one at a time.
var benchCPUStart time.Duration

func startCPU() { benchCPUStart = cpuTime() }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// BenchmarkApplyLong applies the 100,000-event thread to a fresh Thread.
func BenchmarkApplyLong(b *testing.B) {
	loadBenchFixtures(b)
	evs := benchFixtures.longEv
	b.ReportAllocs()
	startCPU()
	m0, start := mallocs(), time.Now()
	for i := 0; i < b.N; i++ {
		thr := NewThread("thread-1")
		for j, e := range evs {
			if res := thr.Apply(uint64(j+1), e); res.Fatal != nil || len(res.Warnings) > 0 {
				b.Fatalf("event %d: %v %v", j, res.Fatal, res.Warnings)
			}
		}
		if thr.Status() != StatusFinished && thr.Status() != StatusErrored {
			b.Fatalf("status %v at the end of the stream", thr.Status())
		}
	}
	reportRate(b, len(evs), time.Since(start), mallocs()-m0)
}

// BenchmarkApplyLongTail applies the last 10,000 events of the long thread
// to a Thread that already holds the first 90,000 (replayed, untimed), next
// to BenchmarkApplyLongHead's first 10,000: equal costs show that the cost
// per event does not grow with the thread. (The replay, not a checkpoint,
// builds the Thread, so that documents are in their steady, already-split
// state, as in a live shard.)
func BenchmarkApplyLongTail(b *testing.B) { benchWindow(b, 90_000) }

// BenchmarkApplyLongHead is BenchmarkApplyLongTail's first 10,000 events.
func BenchmarkApplyLongHead(b *testing.B) { benchWindow(b, 0) }

func benchWindow(b *testing.B, from int) {
	loadBenchFixtures(b)
	evs := benchFixtures.longEv
	const window = 10_000
	b.ReportAllocs()
	b.ResetTimer()
	var elapsed, cpu time.Duration
	var allocs uint64
	counted := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		thr := NewThread("thread-1")
		for j := 0; j < from; j++ {
			thr.Apply(uint64(j+1), evs[j])
		}
		runtime.GC() // do not charge the replay's garbage to the window
		b.StartTimer()
		c0, m0, t0 := cpuTime(), mallocs(), time.Now()
		for j := from; j < from+window; j++ {
			// MESSAGES_SNAPSHOT restates the whole conversation: its cost
			// is O(its own size), which is O(view). It is applied outside
			// the measurement (BenchmarkMessagesSnapshot measures it).
			if evs[j].Type == codec.TypeMessagesSnapshot {
				c1, m1, t1 := cpuTime(), mallocs(), time.Now()
				thr.Apply(uint64(j+1), evs[j])
				c0, m0, t0 = c0+cpuTime()-c1, m0+mallocs()-m1, t0.Add(time.Since(t1))
				continue
			}
			counted++
			if res := thr.Apply(uint64(j+1), evs[j]); res.Fatal != nil {
				b.Fatalf("event %d: %v", j, res.Fatal)
			}
		}
		elapsed += time.Since(t0)
		allocs += mallocs() - m0
		cpu += cpuTime() - c0
	}
	benchCPUStart = cpuTime() - cpu
	reportRate(b, counted/b.N, elapsed, allocs)
}

// BenchmarkMessagesSnapshot applies the long thread's last MESSAGES_SNAPSHOT
// (about 1.4 MB of restated messages) to the thread as it stood before it.
func BenchmarkMessagesSnapshot(b *testing.B) {
	loadBenchFixtures(b)
	evs := benchFixtures.longEv
	last := -1
	for j, e := range evs {
		if e.Type == codec.TypeMessagesSnapshot {
			last = j
		}
	}
	pre := NewThread("thread-1")
	for j := 0; j < last; j++ {
		pre.Apply(uint64(j+1), evs[j])
	}
	cp := pre.AppendCheckpoint(nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		thr, err := LoadCheckpoint(cp)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if res := thr.Apply(uint64(last+1), evs[last]); res.Fatal != nil {
			b.Fatal(res.Fatal)
		}
	}
	b.ReportMetric(float64(len(evs[last].Messages)), "messages")
}

// BenchmarkApplyShort applies 1,000 threads of 100 events, interleaved round
// robin as a shard worker sees them.
func BenchmarkApplyShort(b *testing.B) {
	streams, ids := shortDecoded(b), benchFixtures.shortIDs
	total := 0
	for _, s := range streams {
		total += len(s)
	}
	threads := make([]*Thread, len(streams))
	b.ReportAllocs()
	b.ResetTimer()
	startCPU()
	m0, start := mallocs(), time.Now()
	for i := 0; i < b.N; i++ {
		for k := range threads {
			threads[k] = NewThread(ids[k])
		}
		for j := 0; ; j++ {
			more := false
			for k, s := range streams {
				if j < len(s) {
					more = true
					if res := threads[k].Apply(uint64(j+1), s[j]); res.Fatal != nil {
						b.Fatalf("thread %d event %d: %v", k, j, res.Fatal)
					}
				}
			}
			if !more {
				break
			}
		}
	}
	reportRate(b, total, time.Since(start), mallocs()-m0)
	// The heap the 1,000 finished threads hold, per event applied: what a
	// shard keeps for them (steady-state memory, not garbage).
	b.StopTimer()
	live := heapAfterGC()
	clear(threads)
	b.ReportMetric(float64(live-heapAfterGC())/float64(total), "retained-B/event")
}

// BenchmarkApplyShortJustDecoded times Apply alone on the short threads,
// each thread's events decoded just before (one Decoder per event, so that
// all 100 are valid at once) and only the apply timed: the reducer's cost
// with its input in cache, as in the pipeline, where the event applied is
// the one just decoded. bench/README.md compares it with the apply-only
// row of bench/, which reads 100,000 decoded events held for the whole run.
func BenchmarkApplyShortJustDecoded(b *testing.B) {
	loadShortFixtures(b)
	streams, ids := benchFixtures.short, benchFixtures.shortIDs
	total := 0
	longest := 0
	for _, s := range streams {
		total += len(s)
		longest = max(longest, len(s))
	}
	decs := make([]codec.Decoder, longest)
	evs := make([]codec.Event, longest)
	b.ReportAllocs()
	b.ResetTimer()
	var applying time.Duration
	for i := 0; i < b.N; i++ {
		for k, s := range streams {
			for j, raw := range s {
				if err := decs[j].Decode(raw, &evs[j]); err != nil {
					b.Fatal(err)
				}
			}
			t0 := time.Now()
			thr := NewThread(ids[k])
			for j := range s {
				if res := thr.Apply(uint64(j+1), &evs[j]); res.Fatal != nil {
					b.Fatalf("thread %d event %d: %v", k, j, res.Fatal)
				}
			}
			applying += time.Since(t0)
		}
	}
	n := float64(total) * float64(b.N)
	b.ReportMetric(n/applying.Seconds(), "apply-events/s")
	b.ReportMetric(float64(applying.Nanoseconds())/n, "apply-ns/event")
}

// BenchmarkApplyShortSequential applies the same 1,000 threads one after the
// other: the difference to BenchmarkApplyShort is what interleaving costs in
// cache misses.
func BenchmarkApplyShortSequential(b *testing.B) {
	streams, ids := shortDecoded(b), benchFixtures.shortIDs
	total := 0
	for _, s := range streams {
		total += len(s)
	}
	b.ReportAllocs()
	b.ResetTimer()
	startCPU()
	m0, start := mallocs(), time.Now()
	for i := 0; i < b.N; i++ {
		for k, s := range streams {
			thr := NewThread(ids[k])
			for j, e := range s {
				if res := thr.Apply(uint64(j+1), e); res.Fatal != nil {
					b.Fatalf("thread %d event %d: %v", k, j, res.Fatal)
				}
			}
		}
	}
	reportRate(b, total, time.Since(start), mallocs()-m0)
}

// BenchmarkDecodeApplyShortSequential is BenchmarkApplyShortSequential with
// the codec in the loop: the work @ag-ui/client's whole client pipeline does
// in bench.mjs's threads workload (parse, validate, expand, verify, apply).
func BenchmarkDecodeApplyShortSequential(b *testing.B) {
	loadShortFixtures(b)
	streams, ids := benchFixtures.short, benchFixtures.shortIDs
	total := 0
	for _, s := range streams {
		total += len(s)
	}
	var dec codec.Decoder
	var ev codec.Event
	b.ReportAllocs()
	b.ResetTimer()
	startCPU()
	m0, start := mallocs(), time.Now()
	for i := 0; i < b.N; i++ {
		for k, s := range streams {
			thr := NewThread(ids[k])
			for j, raw := range s {
				if err := dec.Decode(raw, &ev); err != nil {
					b.Fatalf("thread %d event %d: %v", k, j, err)
				}
				if res := thr.Apply(uint64(j+1), &ev); res.Fatal != nil {
					b.Fatalf("thread %d event %d: %v", k, j, res.Fatal)
				}
			}
		}
	}
	reportRate(b, total, time.Since(start), mallocs()-m0)
}

// BenchmarkDecodeShortSequential is BenchmarkDecodeApplyShortSequential
// without the Apply: the codec's share, so that the difference between the
// two is the reducer's cost as the pipeline pays it — on an event the
// decoder has just written, which is in cache, unlike the fixtures' decoded
// events that BenchmarkApplyShortSequential reads cold from a large heap.
func BenchmarkDecodeShortSequential(b *testing.B) {
	loadShortFixtures(b)
	streams := benchFixtures.short
	total := 0
	for _, s := range streams {
		total += len(s)
	}
	var dec codec.Decoder
	var ev codec.Event
	b.ReportAllocs()
	b.ResetTimer()
	startCPU()
	m0, start := mallocs(), time.Now()
	for i := 0; i < b.N; i++ {
		for k, s := range streams {
			for j, raw := range s {
				if err := dec.Decode(raw, &ev); err != nil {
					b.Fatalf("thread %d event %d: %v", k, j, err)
				}
			}
		}
	}
	reportRate(b, total, time.Since(start), mallocs()-m0)
}

// BenchmarkDecodeApplyLong is BenchmarkApplyLong with the codec in the loop.
func BenchmarkDecodeApplyLong(b *testing.B) {
	loadBenchFixtures(b)
	raws := benchFixtures.long
	var bytesIn int64
	for _, r := range raws {
		bytesIn += int64(len(r))
	}
	b.SetBytes(bytesIn)
	b.ReportAllocs()
	var dec codec.Decoder
	var ev codec.Event
	startCPU()
	m0, start := mallocs(), time.Now()
	for i := 0; i < b.N; i++ {
		thr := NewThread("thread-1")
		for j, raw := range raws {
			if err := dec.Decode(raw, &ev); err != nil {
				b.Fatalf("event %d: %v", j, err)
			}
			if res := thr.Apply(uint64(j+1), &ev); res.Fatal != nil {
				b.Fatalf("event %d: %v", j, res.Fatal)
			}
		}
	}
	reportRate(b, len(raws), time.Since(start), mallocs()-m0)
}

// BenchmarkBaselineEncodingJSON decodes the long thread's events with
// encoding/json into maps and reduces nothing: the floor a naive Go consumer
// cannot go below.
func BenchmarkBaselineEncodingJSON(b *testing.B) {
	loadBenchFixtures(b)
	raws := benchFixtures.long
	b.ReportAllocs()
	startCPU()
	m0, start := mallocs(), time.Now()
	for i := 0; i < b.N; i++ {
		for j, raw := range raws {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil || m["type"] == nil {
				b.Fatalf("event %d: %v", j, err)
			}
		}
	}
	reportRate(b, len(raws), time.Since(start), mallocs()-m0)
}

// longThread returns a Thread holding the whole 100k-event thread.
func longThread(b *testing.B) *Thread {
	b.Helper()
	loadBenchFixtures(b)
	thr := NewThread("thread-1")
	for j, e := range benchFixtures.longEv {
		thr.Apply(uint64(j+1), e)
	}
	return thr
}

// BenchmarkCheckpoint encodes and loads a checkpoint of the long thread.
func BenchmarkCheckpoint(b *testing.B) {
	thr := longThread(b)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = thr.AppendCheckpoint(buf[:0])
		if _, err := LoadCheckpoint(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAppendCheckpoint encodes a checkpoint of the long thread (what
// the ingest pays per checkpoint write).
func BenchmarkAppendCheckpoint(b *testing.B) { benchEncode(b, (*Thread).AppendCheckpoint) }

// BenchmarkAppendView encodes the long thread's whole view.
func BenchmarkAppendView(b *testing.B) { benchEncode(b, (*Thread).AppendView) }

// benchEncode times appending the long thread's encoding by enc into a
// reused buffer.
func benchEncode(b *testing.B, enc func(*Thread, []byte) []byte) {
	thr := longThread(b)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = enc(thr, buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}
