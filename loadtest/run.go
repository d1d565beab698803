package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"runtime"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/internal/sockopt"
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/reducer"
)

// counters are the run's totals, updated from every goroutine.
type counters struct {
	eventsIn, publishErrors, offlineFatal atomic.Uint64
	msgsOut, bytesOut                     atomic.Uint64
	connected                             atomic.Int64
	errors                                atomic.Uint64
}

// second is one second of the run.
type second struct {
	eventsIn, msgsOut, bytesOut atomic.Uint64
	hist                        Histogram
}

// series is the run, second by second; at clamps to its last slot.
type series struct {
	start int64 // UnixNano
	secs  []*second
}

func newSeries(start time.Time, n int) *series {
	s := &series{start: start.UnixNano(), secs: make([]*second, n)}
	for i := range s.secs {
		s.secs[i] = new(second)
	}
	return s
}

func (s *series) at(t time.Time) *second { return s.atNano(t.UnixNano()) }

func (s *series) atNano(t int64) *second {
	i := int((t - s.start) / int64(time.Second))
	return s.secs[min(max(i, 0), len(s.secs)-1)]
}

// runner is one load test in progress.
type runner struct {
	cfg    Config
	sc     scenario
	log    *slog.Logger
	bases  []string // fanout URLs (one, or the Target's list)
	sys    *embedded
	node   *node.Node                  // the node run in process, or nil
	pub    *agent.Publisher            // every tenant's, in process (nil with Target)
	pubs   map[string]*agent.Publisher // per tenant, with Target (nil in process)
	client *http.Client
	// slowClient is client, or one with a capped receive buffer for the
	// slow subscribers (scenario.slowRecvBuf).
	slowClient *http.Client

	tenants []string
	tokens  map[string]string
	threads []*threadInfo
	agents  []*simAgent
	subs    []*sub

	stats   counters
	series  *series
	hists   [numVariants]*Histogram
	events  []string // scenario events, with their time
	errMu   sync.Mutex
	errLast map[string]int
	// pubErrLast counts publish failures by cause (the SDK's error with
	// its message id left out), the first few causes.
	pubErrLast map[string]int
}

// notePublishError counts a failed publish and samples its cause.
func (r *runner) notePublishError(err error) {
	r.stats.publishErrors.Add(1)
	cause := err
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := u.Unwrap(); len(errs) > 0 {
			cause = errs[len(errs)-1] // agent.ErrPublish: <message id>: <cause>
		}
	}
	r.errMu.Lock()
	if _, ok := r.pubErrLast[cause.Error()]; ok || len(r.pubErrLast) < 20 {
		r.pubErrLast[cause.Error()]++
	}
	r.errMu.Unlock()
}

func (r *runner) noteError(err error) {
	r.stats.errors.Add(1)
	r.errMu.Lock()
	if len(r.errLast) < 20 {
		r.errLast[err.Error()]++
	}
	r.errMu.Unlock()
}

// Run performs one load test and returns its result. Progress lines go to
// progress once per second.
func Run(ctx context.Context, cfg Config, progress io.Writer, log *slog.Logger) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if progress == nil {
		progress = io.Discard
	}
	r := &runner{cfg: cfg, sc: cfg.scenario(), log: log, tokens: map[string]string{}, errLast: map[string]int{}, pubErrLast: map[string]int{}}
	for i := range r.hists {
		r.hists[i] = new(Histogram)
	}
	natsURL, key := cfg.NatsURL, cfg.AuthKey
	switch {
	case cfg.Target == "" && (cfg.Embedded == "parts" || r.sc.restartAt > 0):
		sys, err := startEmbedded(cfg.Partitions, log)
		if err != nil {
			return nil, err
		}
		defer sys.Close()
		r.sys, r.bases, natsURL, key, r.node = sys, []string{sys.URL}, sys.NatsURL, sys.Key, sys.Node()
		r.cfg.Embedded = "parts"
	case cfg.Target == "":
		n, k, err := startNode(cfg.Partitions, log)
		if err != nil {
			return nil, err
		}
		defer n.Close()
		r.bases, natsURL, key, r.node = []string{n.n.URL()}, n.n.NatsURL(), k, n.n
	default:
		r.bases = splitURLs(cfg.Target)
	}
	pc := agent.DefaultConfig()
	pc.MaxPending = 1 << 17
	if cfg.PublishRetries != 0 {
		pc.MaxRetries = cfg.PublishRetries
	}
	if cfg.Target == "" {
		dial := func() (*nats.Conn, error) {
			return nats.Connect(natsURL, nats.Name("loadtest-agents"), nats.MaxReconnects(-1))
		}
		if r.node != nil {
			// The node's bus is locked: the simulated agents of every
			// tenant share one connection, so it is a service connection
			// of the node.
			dial = func() (*nats.Conn, error) { return r.node.Connect("loadtest-agents", nats.MaxReconnects(-1)) }
		}
		nc, err := dial()
		if err != nil {
			return nil, fmt.Errorf("loadtest: connect %s: %w", natsURL, err)
		}
		defer nc.Close()
		if r.pub, err = agent.New(nc, pc); err != nil {
			return nil, err
		}
	}
	r.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns: 0, MaxIdleConnsPerHost: 64, DisableCompression: true, ForceAttemptHTTP2: false,
	}}
	defer r.client.CloseIdleConnections()
	r.slowClient = r.client
	if n := r.sc.slowRecvBuf; n > 0 {
		r.slowClient = &http.Client{Transport: &http.Transport{
			MaxIdleConns: 0, MaxIdleConnsPerHost: 64, DisableCompression: true, ForceAttemptHTTP2: false,
			DialContext: sockopt.RecvBufferDialer(n).DialContext,
		}}
		defer r.slowClient.CloseIdleConnections()
	}
	if err := r.build(key); err != nil {
		return nil, err
	}
	// The build's garbage (the demo scripts' first runs are made there) is
	// collected before the clock starts: left to the collector, it would
	// be marked and swept in the first seconds of the load, on the join
	// storm those seconds measure, and the collector would pace itself
	// on a heap that was mostly setup.
	runtime.GC()
	start := time.Now()
	for _, s := range r.subs {
		s.join = start.Add(s.joinAfter)
	}
	if cfg.Target != "" {
		// A running Threadcast's bus admits agents only: each tenant's
		// simulated agents connect with a publish token of that tenant.
		closeConns, err := r.connectTenants(natsURL, key, pc)
		defer closeConns()
		if err != nil {
			return nil, err
		}
	}

	r.series = newSeries(start, int((cfg.Duration+cfg.Settle).Seconds())+5)
	stopTrace, err := r.traceLoad()
	if err != nil {
		return nil, err
	}
	var stalls *stallTracer
	if cfg.TraceStalls != "" {
		if stalls, err = startStallTracer(cfg.TraceStalls); err != nil {
			stopTrace()
			return nil, err
		}
	}
	defer stopTrace()
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	var subsWG sync.WaitGroup
	for _, s := range r.subs {
		subsWG.Go(func() { s.run(subCtx) })
	}
	agentCtx, stopAgents := context.WithTimeout(ctx, cfg.Duration)
	defer stopAgents()
	var agentsWG sync.WaitGroup
	for _, a := range r.agents {
		agentsWG.Go(func() { a.play(agentCtx, start) })
	}
	progDone := make(chan struct{})
	var progWG sync.WaitGroup
	progWG.Go(func() { r.progress(progress, start, progDone, stalls) })
	var scWG sync.WaitGroup
	scWG.Go(func() { r.scenarioEvents(agentCtx, start) })

	cpu0 := cpuTime()
	agentsWG.Wait()
	scWG.Wait()
	stopTrace()
	loadCPU := cpuTime() - cpu0
	r.event(start, "agents stopped")
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	for _, p := range r.publishers() {
		if err := p.Close(cctx); err != nil {
			r.noteError(fmt.Errorf("loadtest: publisher close: %w", err))
		}
	}
	cancel()
	published := time.Since(start)

	settled := r.settle(ctx, start)
	stopSubs()
	subsWG.Wait()
	close(progDone)
	progWG.Wait()
	res := r.result(start, published)
	if stalls != nil {
		paths, err := stalls.stop()
		if err != nil {
			r.noteError(err)
		}
		res.StallTraces = paths
	}
	res.ProcessCores = loadCPU.Seconds() / cfg.Duration.Seconds()
	res.Check = r.check(ctx)
	res.Check.Settled = settled
	res.Check.Pass = res.Check.Pass && settled
	res.ServerMetrics = r.scrapeMetrics()
	res.Stages = takeStages(res.ServerMetrics)
	res.Slow = r.slowOut()
	return res, nil
}

// connectTenants opens one agent connection and Publisher per tenant, each
// with a publish token of its tenant (agent.TokenAuth); closeConns closes
// the connections (after the publishers are closed).
func (r *runner) connectTenants(natsURL string, key []byte, pc agent.Config) (closeConns func(), err error) {
	var conns []*nats.Conn
	closeConns = func() {
		for _, nc := range conns {
			nc.Close()
		}
	}
	r.pubs = make(map[string]*agent.Publisher, len(r.tenants))
	for _, t := range r.tenants {
		tok, err := auth.Mint(key, auth.Claims{Tenant: t, Scope: auth.ScopePublish, Expiry: time.Now().Add(24 * time.Hour).Unix()})
		if err != nil {
			return closeConns, fmt.Errorf("loadtest: token: %w", err)
		}
		opts, err := agent.TokenAuth(t, func() string { return tok })
		if err != nil {
			return closeConns, err
		}
		nc, err := nats.Connect(natsURL, append(opts, nats.Name("loadtest-agents-"+t), nats.MaxReconnects(-1))...)
		if err != nil {
			return closeConns, fmt.Errorf("loadtest: connect %s as tenant %s: %w", natsURL, t, err)
		}
		conns = append(conns, nc)
		if r.pubs[t], err = agent.New(nc, pc); err != nil {
			return closeConns, err
		}
	}
	return closeConns, nil
}

// publisher returns the Publisher of tenant's simulated agents.
func (r *runner) publisher(tenant string) *agent.Publisher {
	if r.pubs != nil {
		return r.pubs[tenant]
	}
	return r.pub
}

// publishers returns every Publisher the run uses.
func (r *runner) publishers() []*agent.Publisher {
	if r.pubs == nil {
		return []*agent.Publisher{r.pub}
	}
	ps := make([]*agent.Publisher, 0, len(r.pubs))
	for _, p := range r.pubs {
		ps = append(ps, p)
	}
	return ps
}

// build creates tenants, tokens, threads, agents and subscribers.
func (r *runner) build(key []byte) error {
	cfg := &r.cfg
	var rb [3]byte
	_, _ = rand.Read(rb[:])
	runID := hex.EncodeToString(rb[:])
	seed := cfg.Seed
	if seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		for _, x := range b {
			seed = seed<<8 | uint64(x)
		}
	}
	for i := range cfg.Tenants {
		t := fmt.Sprintf("lt%d", i)
		tok, err := auth.Mint(key, auth.Claims{Tenant: t, Expiry: time.Now().Add(24 * time.Hour).Unix()})
		if err != nil {
			return fmt.Errorf("loadtest: token: %w", err)
		}
		r.tenants, r.tokens[t] = append(r.tenants, t), tok
	}
	personas := demo.Personas()
	r.agents = make([]*simAgent, cfg.Agents)
	for a := range r.agents {
		r.agents[a] = &simAgent{r: r, index: a, tenant: r.tenants[a%cfg.Tenants]}
	}
	for j := range cfg.Threads {
		a := r.agents[j%cfg.Agents]
		id := fmt.Sprintf("lt-%s-%05d", runID, j)
		info := &threadInfo{idx: j, tenant: a.tenant, thread: id, born: make(chan struct{}), offline: reducer.NewThread(id)}
		r.threads = append(r.threads, info)
		script := demo.NewScript(seed+uint64(j)*0x9e3779b97f4a7c15, demo.Options{
			ThreadID: id, Persona: personas[a.index%len(personas)], Verbosity: cfg.Verbosity,
		})
		// Its first run is made now, not at its first tick: all threads
		// start in the first second, and making 2,000 runs then is the
		// generator's work landing on the join storm it measures.
		th := &simThread{info: info, script: script}
		th.load(script.NextRun())
		a.threads = append(a.threads, th)
	}
	hot := 0
	if cfg.HotThreads > 0 {
		hot = int(math.Round(float64(cfg.Subscribers) * cfg.HotFraction))
	}
	for i := range cfg.Subscribers {
		var th *threadInfo
		switch {
		case i < hot:
			th = r.threads[i%cfg.HotThreads]
		case cfg.Threads > cfg.HotThreads:
			th = r.threads[cfg.HotThreads+(i-hot)%(cfg.Threads-cfg.HotThreads)]
		default:
			th = r.threads[i%cfg.Threads]
		}
		v := aguiSSE
		ws := frac(float64(i)*0.6180339887) < cfg.WSFraction
		view := frac(float64(i)*0.7548776662+0.31) < cfg.ViewFraction
		switch {
		case ws && view:
			v = viewWS
		case ws:
			v = aguiWS
		case view:
			v = viewSSE
		}
		r.subs = append(r.subs, &sub{
			r: r, id: i, th: th, v: v, token: r.tokens[th.tenant],
			joinAfter: time.Duration(frac(float64(i)*0.3819660113) * float64(cfg.JoinOver)),
			slow:      frac(float64(i)*0.5698402910+0.17) < r.sc.slowFraction,
		})
	}
	return nil
}

func frac(x float64) float64 { return x - math.Floor(x) }

// traceLoad starts the execution trace of the load (Config.Trace) and
// returns the function that ends it; it also ends by itself after
// TraceFor. The returned function may be called more than once, and
// returns once the trace is written.
func (r *runner) traceLoad() (stop func(), err error) {
	if r.cfg.Trace == nil {
		return func() {}, nil
	}
	if err := trace.Start(r.cfg.Trace); err != nil {
		return nil, fmt.Errorf("loadtest: trace: %w", err)
	}
	var once sync.Once
	end := func() { once.Do(trace.Stop) }
	t := time.AfterFunc(r.cfg.TraceFor, end)
	return func() { t.Stop(); end() }, nil
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r *runner) event(start time.Time, what string) {
	r.events = append(r.events, fmt.Sprintf("%6.1fs %s", time.Since(start).Seconds(), what))
}

// scenarioEvents performs the scenario's storm or restart at its time.
func (r *runner) scenarioEvents(ctx context.Context, start time.Time) {
	at := func(f float64) bool {
		t := time.NewTimer(time.Until(start.Add(time.Duration(f * float64(r.cfg.Duration)))))
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if r.sc.stormAt > 0 && at(r.sc.stormAt) {
		n := 0
		for i, s := range r.subs {
			if frac(float64(i)*0.4142135624) < r.sc.stormFraction {
				s.cut()
				n++
			}
		}
		r.event(start, fmt.Sprintf("reconnect storm: %d subscribers cut", n))
	}
	if r.sc.restartAt > 0 && r.sys != nil && at(r.sc.restartAt) {
		r.event(start, "ingest stopping")
		if err := r.sys.RestartIngest(r.sc.restartPause); err != nil {
			r.noteError(err)
			r.event(start, "ingest restart failed: "+err.Error())
			return
		}
		r.event(start, "ingest restarted")
	}
}

// progress prints one line per second until done is closed, and shows
// each second of the load to stalls, when there is a stall tracer.
func (r *runner) progress(w io.Writer, start time.Time, done <-chan struct{}, stalls *stallTracer) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			sec := r.series.at(now.Add(-time.Second))
			phase := "load"
			if now.Sub(start) > r.cfg.Duration {
				phase = "settle"
			}
			if stalls != nil && phase == "load" {
				if err := stalls.second(int(now.Sub(start).Seconds())-1, float64(sec.hist.Quantile(0.5))); err != nil {
					r.noteError(err)
				}
			}
			fmt.Fprintf(w, "%5.0fs %-6s in %6d ev/s  out %7d msg/s %7.2f MB/s  p50 %7s p99 %7s  conns %5d  err %d\n",
				now.Sub(start).Seconds(), phase, sec.eventsIn.Load(), sec.msgsOut.Load(),
				float64(sec.bytesOut.Load())/1e6, fmtDur(sec.hist.Quantile(0.5)), fmtDur(sec.hist.Quantile(0.99)),
				r.stats.connected.Load(), r.stats.errors.Load())
		}
	}
}

func fmtDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

// settle waits until ingest has applied every stored event (the REST view's
// seq is the last acked one) and every subscriber has caught up with its
// thread (its last seq; agui WebSocket ones, which carry no seq, when
// quiet for a second), or until cfg.Settle. It reports whether both held.
func (r *runner) settle(ctx context.Context, start time.Time) bool {
	deadline := time.Now().Add(r.cfg.Settle)
	pending := append([]*threadInfo(nil), r.threads...)
	for len(pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		next := pending[:0]
		for _, th := range pending {
			want, _ := th.state()
			v, err := r.restView(ctx, th)
			if err != nil || v.Seq < want {
				next = append(next, th)
			}
		}
		pending = next
		if len(pending) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if len(pending) > 0 {
		r.event(start, fmt.Sprintf("settle: %d threads' REST views still behind", len(pending)))
		return false
	}
	r.event(start, "ingest caught up")
	for time.Now().Before(deadline) && ctx.Err() == nil {
		behind := 0
		quiet := time.Now().Add(-time.Second).UnixNano()
		for _, s := range r.subs {
			want, _ := s.th.state()
			if s.v == aguiWS {
				if s.lastRecv.Load() > quiet || s.conns.Load() == 0 {
					behind++
				}
			} else if s.seen.Load() < want {
				behind++
			}
		}
		if behind == 0 {
			r.event(start, "subscribers caught up")
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.event(start, "settle: timed out waiting for subscribers")
	return false
}

// restViewDoc is the answer of GET /v1/threads/{thread}.
type restViewDoc struct {
	Thread string          `json:"thread"`
	Seq    uint64          `json:"seq"`
	Status string          `json:"status"`
	View   json.RawMessage `json:"view"`
}

func (r *runner) restView(ctx context.Context, th *threadInfo) (*restViewDoc, error) {
	// Any fanout node serves any thread: the first that answers does.
	var err error
	for k := range r.bases {
		var v *restViewDoc
		if v, err = r.restViewAt(ctx, r.bases[(th.idx+k)%len(r.bases)], th); err == nil {
			return v, nil
		}
	}
	return nil, err
}

func (r *runner) restViewAt(ctx context.Context, base string, th *threadInfo) (*restViewDoc, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/threads/"+url.PathEscape(th.thread), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.tokens[th.tenant])
	res, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		return nil, fmt.Errorf("loadtest: GET view of %s: %s", th.thread, res.Status)
	}
	var v restViewDoc
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		return nil, fmt.Errorf("loadtest: view of %s: %w", th.thread, err)
	}
	return &v, nil
}
