package pipeline

// Whole-path benchmarks: publish → JetStream → ingest (decode, apply,
// checkpoint, ack) → view frame received by a subscriber, side by side with
// the baseline of raw JetStream publish + consume of the same bytes (no
// decoding, no reducing). Both run against the same kind of embedded server
// (file storage) in the same process.
//
//	go test -run '^$' -bench 'Ingest|RawJetStream' -benchtime 200000x ./pipeline
//
// events/s counts AG-UI events; msgs/s JetStream messages. Latency is from
// the publish call of a message to the arrival of the first frame (or, raw,
// the consumed message) covering it: p50 and p99 in ms.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/wire"
)

// benchThreads is the number of threads the load is spread over.
const benchThreads = 1000

// benchEvents returns a token stream for thread i: runs of RUN_STARTED, a
// text message of 100 content deltas (an answer of a few hundred tokens), a
// state delta, and RUN_FINISHED, with fresh ids per run (about 110 bytes per
// event).
func benchEvents(i, n int) [][]byte {
	out := make([][]byte, 0, n)
	id := "bench-" + strconv.Itoa(i)
	for run := 0; len(out) < n; run++ {
		r, m := "run-"+strconv.Itoa(run), "msg-"+strconv.Itoa(run)
		out = append(out, []byte(`{"type":"RUN_STARTED","threadId":"`+id+`","runId":"`+r+`","timestamp":1700000000000}`))
		out = append(out, []byte(`{"type":"TEXT_MESSAGE_START","messageId":"`+m+`","role":"assistant","timestamp":1700000000001}`))
		for k := 0; k < 100; k++ {
			out = append(out, []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"`+m+`","delta":"token `+strconv.Itoa(k)+` of the answer ","timestamp":1700000000002}`))
		}
		out = append(out, []byte(`{"type":"TEXT_MESSAGE_END","messageId":"`+m+`","timestamp":1700000000003}`))
		out = append(out, []byte(`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/step","value":`+strconv.Itoa(run)+`}],"timestamp":1700000000004}`))
		out = append(out, []byte(`{"type":"RUN_FINISHED","threadId":"`+id+`","runId":"`+r+`","timestamp":1700000000005}`))
	}
	// Cut at a run boundary so every thread ends idle.
	for len(out) > 0 && !slices.Contains([]string{"RUN_FINISHED"}, typeOf(out[len(out)-1])) {
		out = out[:len(out)-1]
	}
	return out
}

func typeOf(b []byte) string {
	const p = `{"type":"`
	if len(b) < len(p) {
		return ""
	}
	rest := b[len(p):]
	for i, c := range rest {
		if c == '"' {
			return string(rest[:i])
		}
	}
	return ""
}

// benchMsg is one message of the load.
type benchMsg struct {
	thread int
	data   []byte
	events int
}

// benchLoad builds ~total events over benchThreads threads, as messages of
// up to batch events, interleaved across threads.
func benchLoad(total, batch int) ([]benchMsg, int) {
	per := max(total/benchThreads, 30)
	streams := make([][][]byte, benchThreads)
	for i := range streams {
		streams[i] = benchEvents(i, per)
	}
	var msgs []benchMsg
	events := 0
	for k := 0; ; k += batch {
		any := false
		for i, evs := range streams {
			if k >= len(evs) {
				continue
			}
			any = true
			n := min(batch, len(evs)-k)
			var data []byte
			for j, e := range evs[k : k+n] {
				if j > 0 {
					data = append(data, '\n')
				}
				data = append(data, e...)
			}
			msgs = append(msgs, benchMsg{thread: i, data: data, events: n})
			events += n
		}
		if !any {
			return msgs, events
		}
	}
}

// benchResult is one run's numbers.
type benchResult struct {
	events, msgs int
	elapsed      time.Duration
	cpu          time.Duration   // process CPU time (user+sys) during the run
	lat          []time.Duration // per message
}

// cpuTime returns the process's CPU time so far. Everything of a run —
// server, publisher, ingest, subscriber — is in this process, so CPU per
// event measures the whole path's cost independently of other load on the
// machine (wall-clock rates do not: the machine is shared).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r benchResult) report(b *testing.B) {
	slices.Sort(r.lat)
	q := func(f float64) float64 {
		if len(r.lat) == 0 {
			return 0
		}
		return float64(r.lat[min(len(r.lat)-1, int(f*float64(len(r.lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(r.events)/r.elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(r.msgs)/r.elapsed.Seconds(), "msgs/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(r.cpu.Microseconds())/float64(r.events), "cpu-µs/event")
	b.ReportMetric(float64(r.cpu.Microseconds())/float64(r.msgs), "cpu-µs/msg")
	b.ReportMetric(0, "ns/op")
}

// publishAll publishes msgs (subject per thread from subj) asynchronously,
// paced to rate messages/s when rate > 0, and returns each message's publish
// time and stream seq.
func publishAll(tb testing.TB, js jetstream.JetStream, msgs []benchMsg, subj func(int) string, batchHeader bool, rate float64) ([]time.Time, []uint64) {
	times := make([]time.Time, len(msgs))
	seqs := make([]uint64, len(msgs))
	futs := make([]jetstream.PubAckFuture, 0, 4096)
	base := 0
	wait := func() {
		for i, f := range futs {
			select {
			case ack := <-f.Ok():
				seqs[base+i] = ack.Sequence
			case err := <-f.Err():
				tb.Fatalf("publish: %v", err)
			}
		}
		base += len(futs)
		futs = futs[:0]
	}
	start := time.Now()
	for i, m := range msgs {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		msg := &nats.Msg{Subject: subj(m.thread), Data: m.data}
		if batchHeader && m.events > 1 {
			msg.Header = nats.Header{wire.HeaderBatch: {strconv.Itoa(m.events)}}
		}
		times[i] = time.Now()
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			tb.Fatal(err)
		}
		futs = append(futs, f)
		if len(futs) == cap(futs) {
			wait()
		}
	}
	wait()
	return times, seqs
}

// arrival is a frame (or raw message) seen by the subscriber.
type arrival struct {
	thread int
	seq    uint64
	at     time.Time
}

// latencies joins publish times with arrivals: a message's latency is the
// time to the first arrival of its thread with seq ≥ its seq.
func latencies(msgs []benchMsg, times []time.Time, seqs []uint64, arr []arrival) []time.Duration {
	byThread := make(map[int][]arrival)
	for _, a := range arr {
		byThread[a.thread] = append(byThread[a.thread], a)
	}
	lat := make([]time.Duration, 0, len(msgs))
	for i, m := range msgs {
		as := byThread[m.thread]
		j, _ := slices.BinarySearchFunc(as, seqs[i], func(a arrival, s uint64) int {
			switch {
			case a.seq < s:
				return -1
			case a.seq > s:
				return 1
			}
			return 0
		})
		if j < len(as) {
			lat = append(lat, as[j].at.Sub(times[i]))
		}
	}
	return lat
}

// runIngestLoad runs one measured load through a fresh server and ingest.
// tapMode is what of the analytics tap a benchmark runs with.
type tapMode int

const (
	tapOff        tapMode = iota // no tap
	tapLive                      // the live tap only: one core publish per event
	tapDurable                   // the live tap, its run summaries kept in the tap stream (Config.TapStream)
	tapDurableAll                // the live tap kept whole in the tap stream (TapKeepAll)
)

func runIngestLoad(b *testing.B, msgs []benchMsg, events int, rate float64, tap tapMode) benchResult {
	return runIngestLoadWith(b, msgs, events, rate, tap, func(tb testing.TB, nc *nats.Conn, cfg Config) { startIngest(tb, nc, cfg) })
}

// runIngestLoadWith is runIngestLoad with the ingest started by start
// (lease_bench_test.go starts a LeasedIngest).
func runIngestLoadWith(b *testing.B, msgs []benchMsg, events int, rate float64, tap tapMode, startFn func(testing.TB, *nats.Conn, Config)) benchResult {
	s := runServer(b)
	nc := connect(b, s)
	pubc := connect(b, s)
	js, _ := jetstream.New(pubc, jetstream.WithPublishAsyncMaxPending(8192))
	cfg := DefaultConfig()
	cfg.Logger = discardLogger()
	cfg.Tap = tap != tapOff // the tap is one publish per event: measured apart
	switch tap {
	case tapDurable:
		cfg.TapKeep = TapKeepSummaries
	case tapDurableAll:
		cfg.TapKeep = TapKeepAll
	default:
		cfg.TapStream = ""
	}
	startFn(b, nc, cfg)

	subjects := make([]string, benchThreads)
	threadOf := make(map[string]int, benchThreads)
	for i := range subjects {
		subjects[i], _ = wire.EventSubject("acme", "bench-"+strconv.Itoa(i))
		threadOf[wire.ViewSubject("acme", wire.EncodeThread("bench-"+strconv.Itoa(i)))] = i
	}
	lastSeq := make([]uint64, benchThreads)
	var mu sync.Mutex
	arr := make([]arrival, 0, len(msgs))
	done := make(chan struct{})
	var remaining = benchThreads
	subc := connect(b, s)
	sub, err := subc.Subscribe(wire.ViewPrefix+".acme.*", func(msg *nats.Msg) {
		seq, _ := strconv.ParseUint(msg.Header.Get(wire.HeaderSeq), 10, 64)
		th := threadOf[msg.Subject]
		mu.Lock()
		defer mu.Unlock()
		arr = append(arr, arrival{th, seq, time.Now()})
		if lastSeq[th] != 0 && seq >= lastSeq[th] {
			lastSeq[th] = 0
			remaining--
			if remaining == 0 {
				close(done)
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	times, seqs := publishAll(b, js, msgs, func(i int) string { return subjects[i] }, true, rate)
	// The last message of each thread tells the subscriber when it is done.
	mu.Lock()
	for i := len(msgs) - 1; i >= 0; i-- {
		if th := msgs[i].thread; lastSeq[th] == 0 {
			lastSeq[th] = seqs[i]
		}
	}
	for _, a := range arr { // frames that arrived before the acks did
		if l := lastSeq[a.thread]; l != 0 && a.seq >= l {
			lastSeq[a.thread] = 0
			remaining--
		}
	}
	if remaining == 0 {
		close(done)
	}
	mu.Unlock()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatal("frames did not arrive")
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	return benchResult{events: events, msgs: len(msgs), elapsed: elapsed, cpu: cpu, lat: latencies(msgs, times, seqs, arr)}
}

// runRawLoad publishes the same bytes to a plain stream and consumes them
// with a pull consumer (ack none): the ceiling.
func runRawLoad(b *testing.B, msgs []benchMsg, events int, rate float64) benchResult {
	s := runServer(b)
	nc := connect(b, s)
	pubc := connect(b, s)
	js, _ := jetstream.New(pubc, jetstream.WithPublishAsyncMaxPending(8192))
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		b.Fatal(err)
	}
	cjs, _ := jetstream.New(nc)
	_ = cjs
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		b.Fatal(err)
	}
	subjects := make([]string, benchThreads)
	for i := range subjects {
		subjects[i] = "raw.acme." + strconv.Itoa(i)
	}
	var mu sync.Mutex
	arr := make([]arrival, 0, len(msgs))
	done := make(chan struct{})
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		meta, _ := msg.Metadata()
		th, _ := strconv.Atoi(msg.Subject()[len("raw.acme."):])
		mu.Lock()
		arr = append(arr, arrival{th, meta.Sequence.Stream, time.Now()})
		if len(arr) == len(msgs) {
			close(done)
		}
		mu.Unlock()
	}, jetstream.PullMaxMessages(2048))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	times, seqs := publishAll(b, js, msgs, func(i int) string { return subjects[i] }, true, rate)
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatal("raw messages did not arrive")
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	return benchResult{events: events, msgs: len(msgs), elapsed: elapsed, cpu: cpu, lat: latencies(msgs, times, seqs, arr)}
}

// BenchmarkIngest and BenchmarkRawJetStream take b.N as the number of
// events (use -benchtime Nx).
func BenchmarkIngest(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			msgs, events := benchLoad(b.N, batch)
			runIngestLoad(b, msgs, events, 0, tapOff).report(b)
		})
	}
}

// BenchmarkIngestTap is BenchmarkIngest with the analytics tap on: live
// only, its run summaries kept in the tap stream (durable, the default),
// and every tap message kept (durable-all); bench/ compares them with
// BenchmarkIngest, the tap off.
func BenchmarkIngestTap(b *testing.B) {
	for _, batch := range []int{1, 32} {
		for _, tc := range []struct {
			name string
			mode tapMode
		}{{"live", tapLive}, {"durable", tapDurable}, {"durable-all", tapDurableAll}} {
			b.Run(fmt.Sprintf("batch=%d/tap=%s", batch, tc.name), func(b *testing.B) {
				msgs, events := benchLoad(b.N, batch)
				runIngestLoad(b, msgs, events, 0, tc.mode).report(b)
			})
		}
	}
}

func BenchmarkRawJetStream(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			msgs, events := benchLoad(b.N, batch)
			runRawLoad(b, msgs, events, 0).report(b)
		})
	}
}

// BenchmarkIngestPaced measures latency at a fixed publish rate, about half
// of the maximum BenchmarkIngest measured on this machine (unbatched ~30,000
// messages/s; batched ~7,000 messages/s of 32 events).
func BenchmarkIngestPaced(b *testing.B) {
	for _, tc := range []struct {
		batch int
		rate  float64 // messages/s
	}{{1, 15000}, {32, 3500}} {
		b.Run(fmt.Sprintf("batch=%d/msgs-per-s=%.0f", tc.batch, tc.rate), func(b *testing.B) {
			msgs, events := benchLoad(b.N, tc.batch)
			runIngestLoad(b, msgs, events, tc.rate, tapOff).report(b)
		})
	}
}
