package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault kinds.
const (
	natsKill      = "nats-kill"      // SIGKILL a NATS server, restart it
	natsStop      = "nats-stop"      // SIGSTOP a NATS server, SIGCONT
	natsPartition = "nats-partition" // cut a NATS server's routes, heal them
	ingestKill    = "ingest-kill"
	ingestStop    = "ingest-stop"
	fanoutKill    = "fanout-kill"
	fanoutStop    = "fanout-stop"
)

var faultKinds = []string{natsKill, natsStop, natsPartition, ingestKill, ingestStop, fanoutKill, fanoutStop}

// Fault is one injected fault and how the system came back from it.
type Fault struct {
	Kind   string    `json:"kind"`
	Target string    `json:"target"`
	At     time.Time `json:"at"`       // injected
	Undone time.Time `json:"restored"` // restarted, continued or healed
	// Down is how long the fault lasted (At to Undone), in seconds.
	Down float64 `json:"downSeconds"`
	// Ready is the time from At to the first health sample after Undone
	// at which every process was ready and the partitions' leases were all
	// held (seconds); -1 if never before the load ended.
	Ready float64 `json:"readySeconds"`
	// Recover is the time to recover (doc.go): from At to the end of the
	// first second, ending after Ready, whose deliveries reached 90 % of
	// the mean of the 5 s before At; -1 if never before the load ended.
	Recover float64 `json:"recoverSeconds"`
	// Service is the time from At to the end of the first second, ending
	// after Undone, whose deliveries reached 90 % of the baseline, whatever
	// the probes said: what subscribers saw (seconds; -1 if never).
	Service  float64 `json:"serviceSeconds"`
	Baseline float64 `json:"baselineDeliveriesPerSec"`
	// Waited names what the last unhealthy sample before Ready lacked:
	// the processes not ready, and "leases n/P" when not all were held.
	Waited []string `json:"waitedFor,omitempty"`
}

// sample is one observation of the cluster's health.
type sample struct {
	t       time.Time
	ready   []bool
	leases  int
	healthy bool
}

// monitor samples the health of every process every interval, and
// restarts a process that exited without the harness causing it (an
// orchestrator would), recording the exit.
type monitor struct {
	c        *cluster
	interval time.Duration
	mu       sync.Mutex
	samples  []sample
	exits    []string
}

func (m *monitor) run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		m.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *monitor) sample(ctx context.Context) {
	ps := m.c.procs()
	s := sample{t: time.Now(), ready: make([]bool, len(ps))}
	var wg sync.WaitGroup
	var held [2]int
	for i, p := range ps {
		wg.Go(func() { s.ready[i] = p.ready(ctx, m.c.client) })
	}
	for i, p := range m.c.ingest {
		wg.Go(func() { held[i] = leasesHeld(ctx, m.c.client, strings.TrimSuffix(p.probe, "/readyz")+"/metrics") })
	}
	wg.Wait()
	s.leases = held[0] + held[1]
	s.healthy = s.leases == m.c.cfg.Partitions
	for _, r := range s.ready {
		s.healthy = s.healthy && r
	}
	m.mu.Lock()
	m.samples = append(m.samples, s)
	m.mu.Unlock()
	for _, p := range ps {
		p.mu.Lock()
		lost := !p.down && p.done != nil
		p.mu.Unlock()
		if lost && !p.running() && ctx.Err() == nil {
			p.noteExit()
			m.mu.Lock()
			m.exits = append(m.exits, fmt.Sprintf("%s %s: %v", time.Now().UTC().Format("15:04:05.000"), p.name, p.exitErr()))
			m.mu.Unlock()
			if err := p.start(); err != nil {
				m.mu.Lock()
				m.exits = append(m.exits, err.Error())
				m.mu.Unlock()
			}
		}
	}
}

// healthySince returns the first sample at or after t that was healthy,
// and what the last unhealthy sample before it lacked.
func (m *monitor) healthySince(t time.Time) (time.Time, []string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var last *sample
	for i := range m.samples {
		s := &m.samples[i]
		if s.t.Before(t) {
			continue
		}
		if s.healthy {
			return s.t, m.lacked(last), true
		}
		last = s
	}
	return time.Time{}, m.lacked(last), false
}

func (m *monitor) lacked(s *sample) []string {
	if s == nil {
		return nil
	}
	var out []string
	for i, p := range m.c.procs() {
		if !s.ready[i] {
			out = append(out, p.name)
		}
	}
	if s.leases != m.c.cfg.Partitions {
		out = append(out, fmt.Sprintf("leases %d/%d", s.leases, m.c.cfg.Partitions))
	}
	return out
}

// waitHealthy waits for a healthy sample taken after now, until timeout or
// ctx; it reports whether one came.
func (m *monitor) waitHealthy(ctx context.Context, timeout time.Duration) bool {
	from := time.Now()
	deadline := from.Add(timeout)
	for time.Now().Before(deadline) {
		if _, _, ok := m.healthySince(from); ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false
}

// leasesHeld reads threadcast_ingest_leases_held from an ingest's /metrics
// (0 when it does not answer).
func leasesHeld(ctx context.Context, client *http.Client, url string) int {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	res, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "threadcast_ingest_leases_held "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f)
		}
	}
	return 0
}

// chaos injects faults until ctx ends or the end time: every FaultMin to
// FaultMax (seeded), once the cluster is healthy again, the next kind of a
// seeded shuffle of every kind (so that short runs still see each), on a
// random process of that kind.
type chaos struct {
	c      *cluster
	m      *monitor
	rng    *rand.Rand
	logf   func(string, ...any)
	faults []*Fault
	order  []string
}

func newChaos(c *cluster, m *monitor, seed uint64, logf func(string, ...any)) *chaos {
	// ChaCha8 from the seed's bytes: PCG seeded with small integers gave
	// runs of the same target here.
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	copy(key[8:], "threadcast chaos")
	return &chaos{c: c, m: m, rng: rand.New(rand.NewChaCha8(key)), logf: logf}
}

func (x *chaos) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(x.rng.Int64N(int64(hi-lo)))
}

// nextKind returns the next kind of the current shuffle.
func (x *chaos) nextKind() string {
	if len(x.order) == 0 {
		x.order = append([]string(nil), x.c.cfg.Kinds...)
		x.rng.Shuffle(len(x.order), func(i, j int) { x.order[i], x.order[j] = x.order[j], x.order[i] })
	}
	k := x.order[0]
	x.order = x.order[1:]
	return k
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// run injects faults until end (the last one starts at least margin before
// it) or ctx; every fault is undone before it returns.
func (x *chaos) run(ctx context.Context, end time.Time, margin time.Duration) {
	cfg := x.c.cfg
	next := time.Now().Add(x.between(cfg.FaultMin, cfg.FaultMax))
	for {
		sleep(ctx, time.Until(next))
		if ctx.Err() != nil || time.Now().After(end.Add(-margin)) {
			return
		}
		if !x.m.waitHealthy(ctx, 60*time.Second) {
			x.logf("not healthy 60 s after the last fault; injecting the next anyway")
		}
		if ctx.Err() != nil || time.Now().After(end.Add(-margin)) {
			return
		}
		f := x.inject(ctx, x.nextKind())
		x.faults = append(x.faults, f)
		x.logf("fault %d: %s of %s, undone after %.1fs", len(x.faults), f.Kind, f.Target, f.Down)
		next = f.At.Add(x.between(cfg.FaultMin, cfg.FaultMax))
	}
}

// inject performs one fault of kind and undoes it; it returns when the
// fault is undone (the process restarted, continued or the routes healed).
// A context ending cuts the fault short, never leaves it in place.
func (x *chaos) inject(ctx context.Context, kind string) *Fault {
	c := x.c
	var p *proc
	switch kind {
	case natsKill, natsStop, natsPartition:
		p = c.nats[x.rng.IntN(3)]
	case ingestKill, ingestStop:
		p = c.ingest[x.rng.IntN(2)]
	case fanoutKill, fanoutStop:
		p = c.fanout[x.rng.IntN(2)]
	}
	f := &Fault{Kind: kind, Target: p.name, At: time.Now(), Ready: -1, Recover: -1, Service: -1}
	switch kind {
	case natsKill, ingestKill, fanoutKill:
		p.kill()
		sleep(ctx, x.between(500*time.Millisecond, 2*time.Second))
		if err := p.start(); err != nil {
			x.logf("restart %s: %v", p.name, err)
		}
	case natsStop, ingestStop, fanoutStop:
		p.pause()
		sleep(ctx, x.between(2*time.Second, 5*time.Second))
		p.resume()
	case natsPartition:
		for i, s := range c.nats {
			if s == p {
				c.isolate(i)
			}
		}
		sleep(ctx, x.between(3*time.Second, 8*time.Second))
		c.heal()
	}
	f.Undone = time.Now()
	f.Down = f.Undone.Sub(f.At).Seconds()
	return f
}
