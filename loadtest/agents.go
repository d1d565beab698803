package main

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/reducer"
)

// threadInfo is one thread of the run: who publishes it, what was stored
// (the offline reduction and the publish time of every acked event, by
// stream seq), and what subscribers look latency up in.
type threadInfo struct {
	idx            int
	tenant, thread string

	mu      sync.Mutex
	pubs    []pubRec // acked events, ascending seq (one publisher per thread, one message in flight)
	lastSeq uint64   // seq of the last acked event
	tainted bool     // an event failed to publish: the stream may have a gap, not checked
	born    chan struct{}
	bornOne sync.Once

	// offline is the reduction of what was stored, applied with the ack's
	// seq by the owning agent only (read after the agents stopped).
	offline *reducer.Thread
}

type pubRec struct {
	seq uint64
	ns  int64 // publish time, UnixNano
}

// snapshot returns lastSeq and whether the thread is tainted.
func (t *threadInfo) state() (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastSeq, t.tainted
}

// simAgent is one simulated agent: it owns its threads and plays their
// demo scripts interleaved, one event per tick, round robin — an agent
// process serving several conversations at once.
type simAgent struct {
	r       *runner
	index   int
	tenant  string
	threads []*simThread
	fifo    []inflight
	dec     codec.Decoder
	ev      codec.Event
}

type simThread struct {
	info   *threadInfo
	script *demo.Script
	run    []byte  // the current run's events, back to back
	ends   []int32 // where each of them ends in run
	pos    int     // the next event's index
}

// load makes evs the current run. The events are kept packed in one byte
// slice: a run's events as demo.Event values are some 400 small
// allocations, and 2,000 threads' would be close to a million objects the
// collector marks on every cycle, in the process that hosts the system
// under test.
func (th *simThread) load(evs []demo.Event) {
	n := 0
	for _, ev := range evs {
		n += len(ev.JSON)
	}
	th.run = make([]byte, 0, n)
	th.ends = make([]int32, len(evs))
	for i, ev := range evs {
		th.run = append(th.run, ev.JSON...)
		th.ends[i] = int32(len(th.run))
	}
	th.pos = 0
}

// event returns the run's event i.
func (th *simThread) event(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = th.ends[i-1]
	}
	return th.run[start:th.ends[i]]
}

type inflight struct {
	th  *simThread
	ns  int64
	ev  []byte
	fut *agent.Future
}

// play publishes until ctx ends, closes the runs it left open with
// RUN_ERROR (as demo.Run does) at its pace, and waits for every ack.
func (a *simAgent) play(ctx context.Context, start time.Time) {
	interval := func() time.Duration {
		f := a.r.sc.rate(time.Since(start), a.r.cfg.Duration)
		return time.Duration(float64(time.Second) * float64(a.r.cfg.Agents) / (a.r.cfg.Rate * max(f, 0.001)))
	}
	// Agents tick at evenly spread phases of their interval: started
	// together, they would otherwise all publish in the same instant,
	// Agents events at once every interval, a burst the configured rate
	// does not describe (the burst scenario is for bursts).
	next := time.Now().Add(time.Duration(float64(interval()) * float64(a.index) / float64(a.r.cfg.Agents)))
	// tick waits for the agent's next tick, iv after the last one, and
	// reports whether ctx let it.
	tick := func(ctx context.Context, iv time.Duration) bool {
		now := time.Now()
		if behind := now.Sub(next); behind > time.Second {
			// Forgive a backlog rather than burst it out, keeping the
			// agent's phase.
			next = next.Add(behind.Truncate(iv))
		}
		next = next.Add(iv)
		if d := next.Sub(now); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
		return ctx.Err() == nil
	}
	rr := a.index % len(a.threads) // agents do not start in lockstep on thread 0
	for tick(ctx, interval()) {
		th := a.threads[rr]
		rr = (rr + 1) % len(a.threads)
		if th.pos == len(th.ends) {
			th.load(th.script.NextRun())
		}
		ev := th.event(th.pos)
		th.pos++
		a.publish(ctx, th, ev)
		a.reap(false)
	}
	// The open runs are closed at the agent's pace during the load (the
	// configured rate, on the same phase), one after another: all of the
	// fleet's at once would be a burst of one event per thread in the same
	// instant, far above any rate the run was given.
	gctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pace := max(time.Duration(float64(time.Second)*float64(a.r.cfg.Agents)/a.r.cfg.Rate), time.Millisecond)
	for _, th := range a.threads {
		if th.pos > 0 && th.pos < len(th.ends) {
			tick(gctx, pace)
			a.publish(gctx, th, []byte(`{"type":"RUN_ERROR","message":"load test stopped","code":"agent_stopped"}`))
			th.pos = len(th.ends)
			a.reap(false)
		}
	}
	a.reap(true)
}

// publish stamps ev with the wall clock in ms (`timestamp`: what agui
// WebSocket subscribers measure latency from) and publishes it.
func (a *simAgent) publish(ctx context.Context, th *simThread, ev []byte) {
	now := time.Now()
	b := make([]byte, 0, len(ev)+24)
	b = append(b, `{"timestamp":`...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	b = append(b, ',')
	b = append(b, ev[1:]...)
	fut, err := a.r.publisher(th.info.tenant).Publish(ctx, th.info.tenant, th.info.thread, b)
	if err != nil {
		a.r.notePublishError(err)
		th.info.mu.Lock()
		th.info.tainted = true
		th.info.mu.Unlock()
		return
	}
	a.r.stats.eventsIn.Add(1)
	a.r.series.at(now).eventsIn.Add(1)
	a.fifo = append(a.fifo, inflight{th: th, ns: now.UnixNano(), ev: b, fut: fut})
}

// reap resolves the acked events at the front of the fifo (all of them,
// waiting, when wait): each is applied to the thread's offline reduction
// with its stream seq and its publish time recorded under that seq.
func (a *simAgent) reap(wait bool) {
	n := 0
	for _, f := range a.fifo {
		if wait {
			<-f.fut.Done()
		} else {
			select {
			case <-f.fut.Done():
			default:
				a.fifo = append(a.fifo[:0], a.fifo[n:]...)
				return
			}
		}
		n++
		ack, err := f.fut.Result()
		info := f.th.info
		if err != nil {
			a.r.notePublishError(err)
			info.mu.Lock()
			info.tainted = true
			info.mu.Unlock()
			continue
		}
		if err := a.dec.Decode(f.ev, &a.ev); err != nil {
			info.mu.Lock()
			info.tainted = true
			info.mu.Unlock()
			continue
		}
		if res := info.offline.Apply(ack.Seq, &a.ev); res.Fatal != nil {
			a.r.stats.offlineFatal.Add(1)
		}
		info.mu.Lock()
		info.pubs = append(info.pubs, pubRec{seq: ack.Seq, ns: f.ns})
		info.lastSeq = ack.Seq
		info.mu.Unlock()
		info.bornOne.Do(func() { close(info.born) })
	}
	clear(a.fifo)
	a.fifo = a.fifo[:0]
}
