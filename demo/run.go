package demo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Publisher is where the demo agents send their events: one AG-UI event (one
// JSON object) for one (tenant, thread). AgentPublisher adapts the SDK's
// *agent.Publisher to it.
//
// Publish is called concurrently by every agent goroutine, each with its own
// threads; the events of one thread come from one goroutine, in order. The
// event buffer is reused after Publish returns: an implementation that keeps
// it copies it. An error means the event may not be in the thread's stream;
// the agent then abandons that thread (its stream may have a gap) and starts
// a new one. An error that reports a failure of an earlier event of the same
// thread is just as good: all the agent needs is to learn of it.
type Publisher interface {
	Publish(ctx context.Context, tenant, thread string, event []byte) error
}

// PublisherFunc adapts a function to Publisher.
type PublisherFunc func(ctx context.Context, tenant, thread string, event []byte) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, tenant, thread string, event []byte) error {
	return f(ctx, tenant, thread, event)
}

// DefaultTenants returns the tenants Run uses when Config.Tenants is empty,
// one per persona, in persona order.
func DefaultTenants() []string { return []string{"acme", "globex", "initech"} }

// Config configures Run. The zero value plays two agents per default tenant
// at the pace of the timing hints.
type Config struct {
	// Tenants the agents publish for. The default tenants keep their own
	// persona (acme: travel, globex: research, initech: devops); another
	// tenant at position i gets persona i mod the number of personas.
	// Empty: DefaultTenants().
	Tenants []string
	// Agents is the number of concurrent agents, spread round-robin over the
	// tenants. Each agent plays one thread at a time. 0: two per tenant.
	Agents int
	// Rate is the target number of events per second over all agents,
	// spread evenly (each agent publishes every Agents/Rate seconds). 0:
	// follow the scripts' timing hints, scaled by TimeScale.
	Rate float64
	// TimeScale multiplies the timing hints when Rate is 0 (0.5 = twice as
	// fast as a live agent). 0 means 1.
	TimeScale float64
	// RunsPerThread is how many runs an agent plays on a thread before it
	// opens a new one, so that the dashboard keeps seeing new threads. 0: 4.
	RunsPerThread int
	// ThreadsPerAgent, if positive, makes each agent stop after that many
	// threads; Run returns when all agents have stopped. 0: play until ctx
	// ends.
	ThreadsPerAgent int
	// Seed makes the traffic reproducible: thread ids and every event derive
	// from it. Use a fresh seed for every start against the same data: a
	// replayed seed re-publishes the same thread ids, and a thread whose run
	// was cut off by the previous stop rejects a second RUN_STARTED.
	Seed uint64
	// Options shape every script (Persona and ThreadID are set per thread).
	Options Options
	// NoTimestamps leaves the events without the `timestamp` field. By
	// default each event is stamped with the wall clock (Unix ms) when it is
	// published, which is what end-to-end latency is measured from.
	NoTimestamps bool
	// OnError, if set, is told about every publish error (from the agent's
	// goroutine; it must not block for long).
	OnError func(tenant, thread string, err error)
}

// Stats counts what Run did.
type Stats struct {
	Events  uint64 // events published without error
	Runs    uint64 // runs started
	Threads uint64 // threads started
	Errors  uint64 // publish errors (each abandons a thread)
}

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("demo: invalid config")

// Run plays the demo agents through p until ctx ends (or, with
// ThreadsPerAgent, until every agent is done) and returns what they did. It
// returns only after every goroutine it started has returned. When ctx ends
// while a run is open, the agent closes it with RUN_ERROR (code
// "agent_stopped", published under a short grace period of its own) so that
// no thread is left running forever in the views.
func Run(ctx context.Context, p Publisher, cfg Config) (Stats, error) {
	if len(cfg.Tenants) == 0 {
		cfg.Tenants = DefaultTenants()
	}
	if cfg.Agents == 0 {
		cfg.Agents = 2 * len(cfg.Tenants)
	}
	if cfg.Agents < 0 || cfg.Rate < 0 || cfg.TimeScale < 0 || cfg.RunsPerThread < 0 {
		return Stats{}, fmt.Errorf("%w: negative Agents, Rate, TimeScale or RunsPerThread", ErrConfig)
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 1
	}
	if cfg.RunsPerThread == 0 {
		cfg.RunsPerThread = 4
	}
	var c counters
	var wg sync.WaitGroup
	for i := range cfg.Agents {
		a := &player{cfg: &cfg, p: p, c: &c, index: i, tenant: cfg.Tenants[i%len(cfg.Tenants)]}
		a.persona = personaFor(a.tenant, i%len(cfg.Tenants))
		wg.Go(func() { a.play(ctx) })
	}
	wg.Wait()
	return Stats{Events: c.events.Load(), Runs: c.runs.Load(), Threads: c.threads.Load(), Errors: c.errors.Load()}, nil
}

type counters struct{ events, runs, threads, errors atomic.Uint64 }

// personaFor gives each default tenant its own persona wherever it appears
// in Config.Tenants, and other tenants the persona of their position.
func personaFor(tenant string, i int) string {
	for k, t := range DefaultTenants() {
		if t == tenant {
			return personas[k%len(personas)].name
		}
	}
	return personas[i%len(personas)].name
}

// player is one demo agent: it owns its scripts, its buffer and its pacing,
// and shares only the counters.
type player struct {
	cfg     *Config
	p       Publisher
	c       *counters
	index   int
	tenant  string
	persona string
	buf     []byte
	next    time.Time // when the next event is due (Rate pacing)
	backoff time.Duration
}

// Grace period for the closing RUN_ERROR after ctx ended.
const stopGrace = 2 * time.Second

func (a *player) play(ctx context.Context) {
	for n := 0; a.cfg.ThreadsPerAgent == 0 || n < a.cfg.ThreadsPerAgent; n++ {
		seed := mix(a.cfg.Seed, uint64(a.index)<<32|uint64(n))
		opts := a.cfg.Options
		opts.Persona = a.persona
		opts.ThreadID = a.persona + "-" + strconv.FormatUint(mix(a.cfg.Seed, 0)&0xffffff, 16) + "-" + strconv.Itoa(a.index) + "-" + strconv.Itoa(n)
		s := NewScript(seed, opts)
		a.c.threads.Add(1)
		if !a.thread(ctx, s) {
			return
		}
	}
}

// thread plays RunsPerThread runs of s. It returns false when ctx ended.
func (a *player) thread(ctx context.Context, s *Script) bool {
	for range a.cfg.RunsPerThread {
		run := s.NextRun()
		a.c.runs.Add(1)
		for i, ev := range run {
			if !a.wait(ctx, ev.Pause) {
				if i > 0 {
					a.stop(ctx, s.ThreadID())
				}
				return false
			}
			if err := a.publish(ctx, s.ThreadID(), ev.JSON); err != nil {
				if ctx.Err() != nil {
					if i > 0 {
						a.stop(ctx, s.ThreadID())
					}
					return false
				}
				a.c.errors.Add(1)
				if a.cfg.OnError != nil {
					a.cfg.OnError(a.tenant, s.ThreadID(), err)
				}
				// Give a failing publisher room to recover, then start afresh
				// on a new thread: this one may have a gap.
				a.backoff = min(max(2*a.backoff, 100*time.Millisecond), 5*time.Second)
				return sleep(ctx, a.backoff)
			}
			a.backoff = 0
			a.c.events.Add(1)
		}
	}
	return true
}

// publish stamps ev with the wall clock (unless disabled) and publishes it.
func (a *player) publish(ctx context.Context, thread string, ev []byte) error {
	if !a.cfg.NoTimestamps {
		a.buf = append(a.buf[:0], `{"timestamp":`...)
		a.buf = strconv.AppendInt(a.buf, time.Now().UnixMilli(), 10)
		a.buf = append(a.buf, ',')
		ev = append(a.buf, ev[1:]...)
		a.buf = ev
	}
	return a.p.Publish(ctx, a.tenant, thread, ev)
}

// stop closes the open run of thread with RUN_ERROR after ctx ended.
func (a *player) stop(ctx context.Context, thread string) {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopGrace)
	defer cancel()
	ev := event(RunError).str("message", "demo agent stopped").str("code", "agent_stopped").done()
	if a.publish(gctx, thread, ev) == nil {
		a.c.events.Add(1)
	}
}

// wait paces the next event: at Rate, every Agents/Rate seconds (a backlog
// of more than a second is forgiven rather than burst out); otherwise after
// the script's hint. It returns false when ctx ended first.
func (a *player) wait(ctx context.Context, hint time.Duration) bool {
	if a.cfg.Rate == 0 {
		return sleep(ctx, time.Duration(float64(hint)*a.cfg.TimeScale))
	}
	interval := time.Duration(float64(time.Second) * float64(a.cfg.Agents) / a.cfg.Rate)
	now := time.Now()
	if a.next.IsZero() || now.Sub(a.next) > time.Second {
		a.next = now
	}
	a.next = a.next.Add(interval)
	return sleep(ctx, a.next.Sub(now))
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// mix derives independent seeds from one (SplitMix64's finaliser).
func mix(seed, k uint64) uint64 {
	z := seed + 0x9e3779b97f4a7c15*(k+1)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
