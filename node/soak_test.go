//go:build soak

package node_test

// NOTE: the abuse soak. The noisy-neighbour harness (runNoisy) runs tenant
// quiet's load — SDK publishes over NATS and bridge POSTs, read back over
// SSE — twice in one invocation on nodes of the same configuration: once
// with nothing else, once while tenant noisy, with valid tokens of its own,
// abuses every door it can reach (attack below). The figures are logged.
//
// The test's process holds the node and quiet's load, in both runs; the
// attacker is a process of its own (the test binary again, attackerEnv in
// its environment; TestMain runs it), started for each abuse run and
// stopped with it, at the lowest CPU priority by default
// (-soak.attacker-nice 19): a real attacker's load generator runs on
// machines of its own, and on the test's machine its CPU would otherwise
// be taken from the node's. -soak.attacker-cpus pins it to CPUs of its own
// instead or as well (the test process then pinned to the others with
// taskset, in both runs alike).
//
// Noisy's HTTP connections come from sources of their own (on Linux all
// of 127.0.0.0/8 is loopback): its idle connections from 127.0.0.2, the
// rest of its abuse from 127.0.0.3; quiet's from 127.0.0.1.
//
// The abuse, at -soak.pace 1: 400 idle connections attempted at once (the
// node's cap is 512, the cap per source 128: the ones past it are refused
// with the 503 and retried after its Retry-After, 1 s; of those held, half idle on
// keep-alive after one request, half send nothing, each reopened when the
// server times it out); 16 taps held that never read (8
// within the tap quota, the rest refused), half with a ?types= list of 60
// duplicates; a 40,000-entry ?types= list (840 KB, over the node's
// bound on a request's headers) once a second; 10 HTTP connects
// a second each with a bad and a good token; 5 NATS connects a second
// each with a bad and a good token; 5 a second each of a Last-Event-ID far
// ahead and of a garbage one; 10 a second each of a body that is not
// JSON, one with 1e999999 and one naming another thread; once a second a
// body declaring 1 GiB and one event over the event size limit; and
// noisy's own thread fed 50 events a second, so its taps have something
// to choke on.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/quota"
)

// soakDuration is how long each run lasts: -soak.duration, or
// THREADCAST_SOAK_DURATION (a Go duration), 60 s when neither is set.
var soakDuration = flag.Duration("soak.duration", envDuration("THREADCAST_SOAK_DURATION", 60*time.Second),
	"how long the abuse (and the quiet run) of TestSoak lasts")

// soakKinds names the kinds of abuse made (comma-separated; "all": every
// one): to find which one hurts, run them alone.
var soakKinds = flag.String("soak.kinds", "all",
	"the kinds of abuse TestSoak makes: all, or a list of publish,idle,tap-huge,tap-unread,http-churn,nats-churn,cursor,bridge-bad,bridge-big")

// soakRounds is how many quiet and abuse runs alternate, each lasting
// soak.duration/soak.rounds.
var soakRounds = flag.Int("soak.rounds", 4, "how many quiet and abuse runs TestSoak alternates")

// soakMaxRatio is the largest accepted ratio of quiet's p99 under abuse to
// its p99 in the quiet runs (the criterion is 2); 0 measures and reports the
// ratio without judging it.
var soakMaxRatio = flag.Float64("soak.max-p99-ratio", 2, "largest accepted ratio of quiet's p99 under abuse to its quiet p99 (0: report only)")

// soakPace scales the rate of every paced kind of abuse (requests,
// connects and noisy's own events per second).
var soakPace = flag.Float64("soak.pace", 1, "how many times the documented rates TestSoak's paced abuse runs at")

// soakAttacker says where noisy's attack runs: "process", a process of its
// own (the test binary again, attackerEnv set), or "inprocess", goroutines
// in the node's process, sharing its runtime (to compare the two).
var soakAttacker = flag.String("soak.attacker", "process", "where TestSoak's attacker runs: process (a process of its own) or inprocess")

// soakAttackerNice is the attacker process's niceness: at 19 it weighs 15
// against the node's 1024 (niceness 0) where both want a CPU, so it takes
// next to none of the node's CPU time and does not preempt it, as an
// attacker on machines of its own would not.
var soakAttackerNice = flag.Int("soak.attacker-nice", 19, "the niceness TestSoak's attacker process runs at (0: the node's own)")

// soakAttackerCPUs, when set, pins the attacker process to these CPUs
// (taskset -c): with the test process pinned to the others (taskset -c
// when starting it), the two share no CPU, and the Go runtime sizes the
// node's GOMAXPROCS to its CPUs.
var soakAttackerCPUs = flag.String("soak.attacker-cpus", "", "the CPUs TestSoak's attacker process is pinned to (taskset -c list; empty: any)")

// soakProfile, when set, writes a CPU profile of the node's process for
// each run's timed load, named <prefix><round>-<quiet|abuse>.pprof.
var soakProfile = flag.String("soak.cpuprofile", "", "a path prefix for TestSoak's CPU profiles of each run (empty: none)")

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// The soak's node limits: the bound on RSS is derived from them.
const (
	soakMaxConns   = 512                                 // Config.MaxConns
	soakPerSource  = 128                                 // Config.MaxConnsPerSource: a quarter of soakMaxConns, the default
	soakIdleConns  = 400                                 // noisy's idle connections attempted at once (past the cap per source; quiet needs ~10)
	soakTaps       = 8                                   // noisy's tap quota
	soakTapReaders = 16                                  // noisy's tap streams that never read, attempted at once (half refused)
	soakBodyFlight = 4 << 20                             // noisy's BodyBytesInFlight
	soakHeaderMax  = fanout.DefaultMaxHeaderBytes + 4096 // Config.HTTPMaxHeaderBytes and net/http's slack: a ?types= list is read within it
	soakMaxMsg     = 1 << 20                             // Pipeline.MaxMsgSize: an event over it is refused by the bridge
)

// TestSoak: while tenant noisy keeps idle connections near the node's cap,
// floods the tap, churns HTTP and NATS connections (with bad tokens too),
// sends bogus cursors and bad bridge bodies, tenant quiet loses and
// duplicates nothing (each event arrives once over SSE; its REST views
// equal the offline reduction of what it published), its publish→delivery
// p99 stays within 2x of the quiet run's, and the process's RSS stays
// under the bound derived from the limits.
func TestSoak(t *testing.T) {
	d, rounds := *soakDuration, *soakRounds
	cfg := noisyConfig{Duration: d / time.Duration(rounds), BThreads: 8, BRate: 200, BBridge: true, Node: func(c *Config) {
		c.MaxConns, c.MaxConnsPerSource = soakMaxConns, soakPerSource
		c.Pipeline.MaxMsgSize = soakMaxMsg
		c.HTTPHeaderTimeout, c.HTTPIdleTimeout = 2*time.Second, 5*time.Second
		c.Quota.Tenants = map[string]quota.Limits{"noisy": {Taps: soakTaps, Streams: 64, BodyBytesInFlight: soakBodyFlight}}
	}}

	// The quiet and the abuse runs alternate, each on a node of its own,
	// the abuse first every other round: the machine's moments (other
	// processes, a warming cache) fall on both alike. In both, this
	// process holds the node and quiet's load and nothing else; the
	// attacker is a process of its own, started for each abuse run.
	counts := map[string]int{}
	var bySource, byNode uint64 // the listeners' refusals
	var quietLat, abuseLat []time.Duration
	var quietRSS, abuseRSS int64 // peaks
	var quietCPU, abuseCPU, attackCPU, quietWall, abuseWall time.Duration
	var conns, tx, rx int64
	for round := range rounds {
		for _, abuse := range []bool{round%2 == 1, round%2 == 0} {
			name := map[bool]string{false: "quiet", true: "abuse"}[abuse]
			var rss rssPeak
			var cpu, wall time.Duration // this process's CPU time and the wall time of quiet's timed load
			cfg.Attack = func(n *Node, stop <-chan struct{}) {
				stopProfile := startProfile(t, fmt.Sprintf("%d-%s", round, name))
				defer stopProfile()
				cpu0, wall0 := processCPU(), time.Now()
				defer func() { cpu, wall = processCPU()-cpu0, time.Since(wall0) }()
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); rss.sample(stop) }()
				defer wg.Wait()
				if !abuse {
					return
				}
				spec := attackSpec{URL: n.URL(), NatsURL: n.NatsURL(), MaxEvent: maxEventBytes(n), Kinds: *soakKinds, Pace: *soakPace}
				rep, err := runAttack(t, spec, stop)
				if err != nil {
					t.Errorf("round %d: the attacker: %v", round, err)
				}
				for k, v := range rep.Counts {
					counts[k] += v
				}
				attackCPU += rep.CPU
				conns, tx, rx = conns+rep.Conns, tx+rep.Tx, rx+rep.Rx
				capped := n.Listener().(*connlimit.Listener)
				bySource += capped.RefusedBy(connlimit.BySource)
				byNode += capped.RefusedBy(connlimit.ByNode)
			}
			r := runNoisy(t, cfg)
			t.Logf("round %d, %s run: quiet's %d events, p50 %v p99 %v, RSS at start %d MiB, peak %d MiB, the node's process used %.2f of a core",
				round, name, r.BSent, r.BP50, r.BP99, rss.base>>20, rss.peak.Load()>>20, cpu.Seconds()/wall.Seconds())
			if r.BSent == 0 || r.BDelivered != r.BSent || r.BLost != 0 || r.BDup != 0 || !r.BViewsExact {
				t.Errorf("round %d, %s run: quiet sent %d, delivered %d, lost %d, duplicated %d, views exact %v",
					round, name, r.BSent, r.BDelivered, r.BLost, r.BDup, r.BViewsExact)
			}
			if !abuse {
				quietLat, quietRSS = append(quietLat, r.BLat...), max(quietRSS, rss.peak.Load())
				quietCPU, quietWall = quietCPU+cpu, quietWall+wall
				continue
			}
			abuseLat, abuseRSS = append(abuseLat, r.BLat...), max(abuseRSS, rss.peak.Load())
			abuseCPU, abuseWall = abuseCPU+cpu, abuseWall+wall
			checkRSS(t, round, &rss)
		}
	}
	qp50, qp99 := quantiles(quietLat)
	ap50, ap99 := quantiles(abuseLat)
	t.Logf("quiet runs: %d events, p50 %v p99 %v, RSS peak %d MiB", len(quietLat), qp50, qp99, quietRSS>>20)
	t.Logf("abuse runs: %d events, p50 %v p99 %v, RSS peak %d MiB", len(abuseLat), ap50, ap99, abuseRSS>>20)
	a := &attack{counts: counts}
	t.Logf("noisy's requests by kind and answer: %v", a.sorted())
	answers := 0
	for _, v := range counts {
		answers += v
	}
	secs := abuseWall.Seconds()
	t.Logf("noisy achieved: %.0f answers/s, %.0f connections/s, %.1f MB/s sent, %.1f MB/s received; the attacker used %.2f of a core (%s)",
		float64(answers)/secs, float64(conns)/secs, float64(tx)/secs/1e6, float64(rx)/secs/1e6, attackCPU.Seconds()/secs, attackerWhere())
	t.Logf("the node's process used %.2f of a core in the quiet runs, %.2f in the abuse runs",
		quietCPU.Seconds()/quietWall.Seconds(), abuseCPU.Seconds()/secs)
	// The attacker kept its pace (at the lowest CPU priority it could
	// fall behind on a busy machine, and a weaker attack measure less):
	// every paced kind made at least half the requests its rate schedules.
	for _, k := range []struct {
		kind, prefix string
		perSec       float64
	}{{"tap-huge", "tap types huge ", 1}, {"http-churn", "http churn ", 20}, {"nats-churn", "nats churn ", 10},
		{"cursor", "cursor ", 10}, {"bridge-bad", "bridge not json ", 10}, {"bridge-bad", "bridge huge number ", 10},
		{"bridge-bad", "bridge wrong thread ", 10}, {"bridge-big", "bridge oversized ", 2}} {
		if *soakKinds != "all" && !slices.Contains(strings.Split(*soakKinds, ","), k.kind) {
			continue
		}
		made := 0
		for key, v := range counts {
			if strings.HasPrefix(key, k.prefix) {
				made += v
			}
		}
		if want := k.perSec * *soakPace * secs; float64(made) < want/2 {
			t.Errorf("noisy made %d %q requests, under half the %.0f its pace schedules", made, strings.TrimSpace(k.prefix), want)
		}
	}
	ratio := float64(ap99) / float64(qp99)
	switch {
	case *soakMaxRatio > 0 && ratio > *soakMaxRatio:
		t.Errorf("quiet's p99 under abuse is %.2fx the quiet runs' (%v vs %v), want at most %gx", ratio, ap99, qp99, *soakMaxRatio)
	default:
		t.Logf("quiet's p99 under abuse is %.2fx the quiet runs' (%v vs %v); accepted at most: %gx (0: report only)", ratio, ap99, qp99, *soakMaxRatio)
	}
	// Every kind of abuse was made and answered as the product documents.
	for _, want := range []string{"idle held", "tap types huge 431", "tap unread duplicated types 200", "tap unread 200",
		"tap unread 429", "http churn bad token 401", "http churn 200", "nats churn bad token refused", "nats churn ok",
		"cursor ahead 200", "cursor garbage 200", "bridge not json 400", "bridge huge number 422",
		"bridge wrong thread 422", "bridge oversized declared 413", "bridge oversized event 413", "idle refused 503"} {
		if a.count(want) == 0 && *soakKinds == "all" {
			t.Errorf("no %q among noisy's answers %v", want, a.sorted())
		}
	}
	// A 503 is the connection caps' refusal (noisy's connections past the
	// cap per source); any other 5xx, a refusal that is not the documented
	// one, or an answer held past its bound, is a failure.
	for k, n := range a.kinds() {
		if (strings.Contains(k, " 5") && !strings.HasSuffix(k, " 503")) || strings.Contains(k, "slow") || strings.Contains(k, "undocumented") || strings.HasPrefix(k, "attacker error") {
			t.Errorf("noisy got a server error, an undocumented refusal or a slow answer, or the attacker failed, %d times: %s", n, k)
		}
	}
	// Every refusal was the cap per source's: the node's cap, which would
	// refuse quiet too, was never reached.
	if (bySource == 0 && a.count("idle held") > 0) || byNode != 0 {
		t.Errorf("connections refused by the cap per source %d, by the node's cap %d; want some, none", bySource, byNode)
	}
	t.Logf("connections refused by the cap per source %d, by the node's cap %d", bySource, byNode)
}

// dialerFrom dials TCP from ip. The port is chosen at connect, not at
// bind (IP_BIND_ADDRESS_NO_PORT): a bind to port 0 searches the whole
// ephemeral range, and at the hundreds of connects a second noisy makes
// that search was the attacker's largest cost, taken from the same cores
// as the node's.
func dialerFrom(ip net.IP) *net.Dialer {
	const ipBindAddressNoPort = 0x18 // IP_BIND_ADDRESS_NO_PORT, linux/in.h
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1) })
	}}
}

// checkRSS fails if r's peak is over the bound the soak's limits allow.
func checkRSS(t *testing.T, round int, r *rssPeak) {
	t.Helper()
	// RSS: the node's process (the node and quiet's clients; noisy's too
	// with -soak.attacker inprocess) at the start of the abuse, plus what
	// the limits let noisy hold, twice over for the garbage collector's
	// headroom (GOGC=100): per connection up to the cap, the server's and
	// the client's buffers and goroutines (64 KiB together; the server's
	// alone when the attacker is a process of its own); per tap within
	// the quota, its 4096 pending messages (fanout's tap buffer) (at
	// most 1 KiB each here); the bodies in flight within the quota, four
	// times over for decoding; and one huge ?types= request's headers, on
	// each side.
	held := int64(soakMaxConns)*64<<10 + int64(soakTaps)*4096*1<<10 + 4*soakBodyFlight + 2*soakHeaderMax
	if bound := r.base + 2*held; r.peak.Load() > bound {
		t.Errorf("round %d: RSS peaked at %d MiB under abuse, over the bound of %d MiB (%d MiB at the start + 2 x %d MiB the limits allow)",
			round, r.peak.Load()>>20, bound>>20, r.base>>20, held>>20)
	}
}

// rssPeak samples the process's resident set size every 50 ms: the first
// sample is base, the largest peak.
type rssPeak struct {
	base int64
	peak atomic.Int64
}

func (r *rssPeak) sample(stop <-chan struct{}) {
	r.base = vmRSS()
	r.peak.Store(r.base)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if v := vmRSS(); v > r.peak.Load() {
				r.peak.Store(v)
			}
		}
	}
}

// vmRSS is VmRSS of /proc/self/status in bytes (0 if unreadable).
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// attack is tenant noisy's abuse: each kind runs in its own goroutine
// until stop, at a bounded pace, loopback only, and counts the answers it
// got by "kind answer".
type attack struct {
	// idleFrom dials the idle connections, from one source; from dials
	// noisy's other HTTP connections (and its NATS ones), from another.
	idleFrom, from *countingDialer
	mu             sync.Mutex
	counts         map[string]int
}

// newAttack is an attack whose dialers count into one set of totals.
func newAttack() *attack {
	var tot dialTotals
	return &attack{counts: map[string]int{},
		idleFrom: &countingDialer{d: dialerFrom(net.IPv4(127, 0, 0, 2)), tot: &tot},
		from:     &countingDialer{d: dialerFrom(net.IPv4(127, 0, 0, 3)), tot: &tot}}
}

// fail counts an error of the attacker's own (not an answer of the
// node's); TestSoak fails on any.
func (a *attack) fail(err error) { a.add("attacker error: " + err.Error()) }

func (a *attack) add(kind string) {
	a.mu.Lock()
	a.counts[kind]++
	a.mu.Unlock()
}

func (a *attack) count(kind string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[kind]
}

// kinds is a copy of the counts.
func (a *attack) kinds() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.counts)
}

func (a *attack) sorted() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for k, v := range a.counts {
		out = append(out, fmt.Sprintf("%s: %d", k, v))
	}
	slices.Sort(out)
	return out
}

// every calls f every interval (divided by -soak.pace) until stop.
func every(interval time.Duration, stop <-chan struct{}, f func()) {
	tick := time.NewTicker(time.Duration(float64(interval) / *soakPace))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			f()
		}
	}
}

// run starts every kind of abuse against the node spec names and returns
// when all have stopped.
func (a *attack) run(spec attackSpec, stop <-chan struct{}) {
	tok, err := mintToken("noisy")
	if err != nil {
		a.fail(err)
		return
	}
	addr := strings.TrimPrefix(spec.URL, "http://")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	// A client of noisy's own: no keep-alive shared with quiet's.
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DialContext: a.from.DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	// get does one request and drains at most 64 KiB of its answer: its
	// status, or "error" (a refused connection is counted as its 503).
	get := func(req *http.Request) string {
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return "stopped"
			}
			return "error " + err.Error()
		}
		_, _ = io.CopyN(io.Discard, res.Body, 64<<10)
		res.Body.Close()
		if time.Since(start) > 2*time.Second {
			return "slow " + strconv.Itoa(res.StatusCode)
		}
		return strconv.Itoa(res.StatusCode)
	}
	newReq := func(method, path, body string) *http.Request {
		req, _ := http.NewRequestWithContext(ctx, method, spec.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		return req
	}

	var wg sync.WaitGroup
	kinds := strings.Split(*soakKinds, ",")
	on := func(kind string) bool { return *soakKinds == "all" || slices.Contains(kinds, kind) }
	spawn := func(kind string, f func()) {
		if on(kind) {
			wg.Add(1)
			go func() { defer wg.Done(); f() }()
		}
	}

	// Noisy's own thread, published at 50 events/s, so that its taps and
	// streams have something to choke on.
	nopts, err := agent.TokenAuth("noisy", func() string { return tok })
	if err != nil {
		a.fail(err)
		return
	}
	nc, err := nats.Connect(spec.NatsURL, append(nopts, nats.SetCustomDialer(a.from))...)
	if err != nil {
		a.fail(err)
		return
	}
	defer nc.Close()
	_ = nc.Publish("agui.noisy.a.events", []byte(`{"type":"RUN_STARTED","threadId":"a","runId":"r"}`))
	_ = nc.Publish("agui.noisy.a.events", []byte(`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`))
	spawn("publish", func() {
		every(20*time.Millisecond, stop, func() {
			_ = nc.Publish("agui.noisy.a.events", []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"`+strings.Repeat("x", 200)+`"}`))
		})
	})

	// Idle connections: soakIdleConns held at once, each reopened when the
	// server closes it (half send one request, then idle on keep-alive;
	// half send nothing). Each counts its answers.
	for i := 0; i < soakIdleConns; i++ {
		speak := i%2 == 0
		spawn("idle", func() {
			for ctx.Err() == nil {
				a.idle(ctx, addr, speak)
			}
		})
	}

	// Tap floods: a 40,000-entry ?types= list (refused with a 431: over
	// the bound on a request's headers); and soakTapReaders taps held at
	// once that never read a byte, half of them with a list of 60
	// duplicates (under the entry bound, one type once deduplicated), the
	// others with every type.
	huge := strings.TrimSuffix(strings.Repeat("TEXT_MESSAGE_CONTENT,", 40000), ",")
	dup := strings.TrimSuffix(strings.Repeat("TEXT_MESSAGE_CONTENT,", 60), ",")
	spawn("tap-huge", func() {
		every(1000*time.Millisecond, stop, func() { a.add("tap types huge " + get(newReq("GET", "/v1/tap?types="+huge, ""))) })
	})
	for i := 0; i < soakTapReaders; i++ {
		kind, query := "tap unread ", ""
		if i%2 == 0 {
			kind, query = "tap unread duplicated types ", "?types="+dup
		}
		spawn("tap-unread", func() {
			for ctx.Err() == nil {
				a.unreadTap(ctx, addr, tok, kind, query)
			}
		})
	}

	// Connect churn over HTTP: a new connection per request, with a bad
	// token and with a good one.
	churn := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: a.from.DialContext}, Timeout: 5 * time.Second}
	spawn("http-churn", func() {
		every(100*time.Millisecond, stop, func() {
			bad, _ := http.NewRequestWithContext(ctx, "GET", spec.URL+"/v1/threads", nil)
			bad.Header.Set("Authorization", "Bearer "+tok[:len(tok)-4]+"AAAA")
			good := newReq("GET", "/v1/threads", "")
			for kind, req := range map[string]*http.Request{"http churn bad token ": bad, "http churn ": good} {
				res, err := churn.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						a.add(kind + "error " + err.Error())
					}
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				a.add(kind + strconv.Itoa(res.StatusCode))
			}
		})
	})
	// Connect churn over NATS: a bad token (refused by the auth callout)
	// and a good one (connected, then closed).
	spawn("nats-churn", func() {
		badTok := tok[:len(tok)-4] + "AAAA"
		every(200*time.Millisecond, stop, func() {
			for _, bad := range []bool{true, false} {
				tk := tok
				if bad {
					tk = badTok
				}
				opts, err := agent.TokenAuth("noisy", func() string { return tk })
				if err != nil {
					a.fail(err)
					return
				}
				c, err := nats.Connect(spec.NatsURL, append(opts, nats.NoReconnect(), nats.Timeout(2*time.Second), nats.SetCustomDialer(a.from))...)
				switch {
				case bad && err != nil && errors.Is(err, nats.ErrAuthorization):
					a.add("nats churn bad token refused")
				case bad && err != nil:
					a.add("nats churn bad token refused (" + err.Error() + ")")
				case bad:
					a.add("nats churn bad token error: connected")
					c.Close()
				case err != nil:
					a.add("nats churn error " + err.Error())
				default:
					a.add("nats churn ok")
					c.Close()
				}
			}
		})
	})

	// Bogus cursors on noisy's own thread: far ahead, and garbage. Either
	// is answered at once (a snapshot), not held.
	spawn("cursor", func() {
		every(200*time.Millisecond, stop, func() {
			for kind, cur := range map[string]string{"cursor ahead ": "99999999999", "cursor garbage ": "zz;\u00e9/..%00"} {
				rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
				req := newReq("GET", "/v1/threads/a/events", "").WithContext(rctx)
				req.Header.Set("Last-Event-ID", cur)
				start := time.Now()
				res, err := tr.RoundTrip(req)
				switch {
				case err != nil && ctx.Err() == nil:
					a.add(kind + "error " + err.Error())
				case err != nil:
				case time.Since(start) > time.Second:
					a.add(kind + "slow " + strconv.Itoa(res.StatusCode))
					res.Body.Close()
				default:
					a.add(kind + strconv.Itoa(res.StatusCode))
					res.Body.Close()
				}
				rcancel()
			}
		})
	})

	// Bad bridge bodies.
	bodies := map[string]string{
		"bridge not json ":     "this is not JSON\n",
		"bridge huge number ":  `{"type":"CUSTOM","name":"n","value":1e999999}` + "\n",
		"bridge wrong thread ": `{"type":"RUN_STARTED","threadId":"elsewhere","runId":"r2"}` + "\n",
	}
	spawn("bridge-bad", func() {
		every(100*time.Millisecond, stop, func() {
			for kind, body := range bodies {
				a.add(kind + get(newReq("POST", "/v1/ingest/noisy/b", body)))
			}
		})
	})
	// Oversized: a declared body over the bridge's 64 MiB (raw TCP: the
	// client sends only the headers), and one event over the event limit.
	big := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat("y", spec.MaxEvent+1) + `"}` + "\n"
	spawn("bridge-big", func() {
		every(1000*time.Millisecond, stop, func() {
			a.add("bridge oversized declared " + rawStatus(ctx, a.from, addr, "POST /v1/ingest/noisy/b HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tok+
				"\r\nContent-Length: "+strconv.Itoa(1<<30)+"\r\n\r\n"))
			a.add("bridge oversized event " + get(newReq("POST", "/v1/ingest/noisy/b", big)))
		})
	})

	wg.Wait()
}

// idle holds one connection until the server closes it or ctx ends:
// speak sends one request first (then it idles on keep-alive). A
// connection refused (the 503, or a reset when the request crossed the
// refusal's close) is retried after the refusal's Retry-After, 1 s: the
// idle kind holds connections; churning connects is http-churn's, at its
// own pace.
func (a *attack) idle(ctx context.Context, addr string, speak bool) {
	c, err := a.idleFrom.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() == nil {
			a.add("idle error " + err.Error())
			time.Sleep(100 * time.Millisecond)
		}
		return
	}
	defer c.Close()
	stopped := context.AfterFunc(ctx, func() { c.Close() })
	defer stopped()
	br := bufio.NewReader(c)
	if speak {
		if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			a.refusedReset(ctx)
			return
		}
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil && errors.Is(err, syscall.ECONNRESET) {
		a.refusedReset(ctx)
		return
	}
	if err == nil {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
		res.Body.Close()
		if res.StatusCode == http.StatusServiceUnavailable {
			// The documented refusal, at accept: before any request.
			if string(body) != `{"error":"too_many_connections"}`+"\n" || res.Header.Get("Retry-After") != "1" || !res.Close {
				a.add(fmt.Sprintf("idle refused 503 undocumented: %q, Retry-After %q, close %v", body, res.Header.Get("Retry-After"), res.Close))
			}
			a.add("idle refused 503")
			pause(ctx, time.Second)
			return
		}
		a.add("idle held")
		// Now idle on keep-alive until the server's idle timeout.
		_, err = br.ReadByte()
	}
	if ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		a.add("idle timed out by the server")
	}
}

// refusedReset counts an idle connection reset before its answer (refused
// while its request was on the way) and waits the refusal's Retry-After.
func (a *attack) refusedReset(ctx context.Context) {
	if ctx.Err() == nil {
		a.add("idle refused reset")
		pause(ctx, time.Second)
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// unreadTap opens a tap of noisy's events and never reads it, until the
// server ends it or ctx ends.
func (a *attack) unreadTap(ctx context.Context, addr, tok, kind, query string) {
	c, err := a.from.DialContext(ctx, "tcp", addr)
	if err != nil {
		return
	}
	defer c.Close()
	stopped := context.AfterFunc(ctx, func() { c.Close() })
	defer stopped()
	// A small receive buffer, so that the server's writes back up soon.
	if tc, ok := c.(interface{ SetReadBuffer(int) error }); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	if _, err := io.WriteString(c, "GET /v1/tap"+query+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tok+"\r\n\r\n"); err != nil {
		return
	}
	br := bufio.NewReaderSize(c, 4<<10)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return
	}
	a.add(kind + strconv.Itoa(res.StatusCode))
	if res.StatusCode != http.StatusOK {
		time.Sleep(200 * time.Millisecond)
		return
	}
	<-ctx.Done() // never read: the server's write deadline ends it, or the run does
}

// rawStatus writes head on a new connection dialled by d and returns the
// answer's status.
func rawStatus(ctx context.Context, d *countingDialer, addr, head string) string {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "error " + err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, head); err != nil {
		return "error " + err.Error()
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		if ctx.Err() != nil {
			return "stopped"
		}
		return "error " + err.Error()
	}
	res.Body.Close()
	return strconv.Itoa(res.StatusCode)
}

// attackerEnv, in the environment of the test binary, makes it the
// attacker: TestMain runs the attack its value describes (an attackSpec in
// JSON) until its standard input closes (the test stopping it, or the test
// process gone), then writes an attackReport in JSON to its standard output
// and exits.
const attackerEnv = "THREADCAST_SOAK_ATTACKER"

// attackSpec is what the attacker is told: the node's addresses and
// largest event, and the -soak.kinds and -soak.pace of the test.
type attackSpec struct {
	URL, NatsURL string
	MaxEvent     int
	Kinds        string
	Pace         float64
}

// attackReport is what the attacker did: its answers by "kind answer", the
// connections it opened and the bytes it sent and received on them, and
// the CPU time it used.
type attackReport struct {
	Counts        map[string]int
	Conns, Tx, Rx int64
	CPU           time.Duration
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(attackerEnv); spec != "" {
		os.Exit(attackerMain(spec))
	}
	os.Exit(m.Run())
}

// attackerMain is the attacker process's main.
func attackerMain(js string) int {
	var spec attackSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", attackerEnv, err)
		return 2
	}
	*soakKinds, *soakPace = spec.Kinds, spec.Pace
	stop := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	a := newAttack()
	a.run(spec, stop)
	<-stop // run returns early only on an error of its own, counted
	if err := json.NewEncoder(os.Stdout).Encode(a.report(processCPU())); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// report is what a did, with cpu as its CPU time.
func (a *attack) report(cpu time.Duration) attackReport {
	tot := a.from.tot
	return attackReport{Counts: a.kinds(), Conns: tot.conns.Load(), Tx: tot.tx.Load(), Rx: tot.rx.Load(), CPU: cpu}
}

// runAttack runs noisy's attack on the node spec names until stop, where
// -soak.attacker says, and returns what it did. The attacker process is
// this test's to end: stopped by closing its standard input, killed if it
// has not exited 30 s later or if the test ends first.
func runAttack(t *testing.T, spec attackSpec, stop <-chan struct{}) (attackReport, error) {
	if *soakAttacker == "inprocess" {
		cpu0 := processCPU()
		a := newAttack()
		a.run(spec, stop)
		return a.report(processCPU() - cpu0), nil // the node's CPU too: this process's is shared
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return attackReport{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return attackReport{}, err
	}
	args := []string{exe, "-test.run=^$"}
	if *soakAttackerCPUs != "" {
		args = append([]string{"taskset", "-c", *soakAttackerCPUs}, args...)
	}
	if *soakAttackerNice != 0 {
		args = append([]string{"nice", "-n", strconv.Itoa(*soakAttackerNice)}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), attackerEnv+"="+string(js))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A belt to the braces of its standard input: the kernel kills it if
	// the thread that started it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return attackReport{}, err
	}
	if err := cmd.Start(); err != nil {
		return attackReport{}, err
	}
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	<-stop
	in.Close()
	kill := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	err = cmd.Wait()
	waited = true
	kill.Stop()
	if err != nil {
		return attackReport{}, fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	var rep attackReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return attackReport{}, fmt.Errorf("its report %q: %v (stderr: %s)", stdout.String(), err, stderr.String())
	}
	return rep, nil
}

// attackerWhere says where the attacker ran, for the log.
func attackerWhere() string {
	if *soakAttacker == "inprocess" {
		return "in the node's process"
	}
	cpus := "any CPU"
	if *soakAttackerCPUs != "" {
		cpus = "CPUs " + *soakAttackerCPUs
	}
	return fmt.Sprintf("a process of its own at niceness %d on %s", *soakAttackerNice, cpus)
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startProfile starts a CPU profile named by -soak.cpuprofile and name, and
// returns its stop; without the flag, nothing. Heap profiles taken at the
// start and the stop (-heap0, -heap1) give what the run allocated (pprof
// -sample_index=alloc_space -diff_base).
func startProfile(t *testing.T, name string) func() {
	if *soakProfile == "" {
		return func() {}
	}
	writeHeap(t, *soakProfile+name+"-heap0.pprof")
	f, err := os.Create(*soakProfile + name + ".pprof")
	if err != nil {
		t.Error(err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Error(err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			t.Error(err)
		}
		writeHeap(t, *soakProfile+name+"-heap1.pprof")
	}
}

// writeHeap writes the heap profile to path.
func writeHeap(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Error(err)
		return
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Error(err)
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}
}

// dialTotals are what an attack's dialers opened and moved.
type dialTotals struct {
	conns, tx, rx atomic.Int64
}

// countingDialer dials with d and counts into tot: connections, and the
// bytes written and read on them.
type countingDialer struct {
	d   *net.Dialer
	tot *dialTotals
}

func (c *countingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.tot.conns.Add(1)
	return &countingConn{Conn: conn, tot: c.tot}, nil
}

// Dial is nats.CustomDialer's.
func (c *countingDialer) Dial(network, addr string) (net.Conn, error) {
	return c.DialContext(context.Background(), network, addr)
}

type countingConn struct {
	net.Conn
	tot *dialTotals
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.tot.rx.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.tot.tx.Add(int64(n))
	return n, err
}

func (c *countingConn) SetReadBuffer(n int) error {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		return tc.SetReadBuffer(n)
	}
	return nil
}

// mintToken is a read and publish token of tenant, under testKey.
func mintToken(tenant string) (string, error) {
	return auth.Mint(testKey, auth.Claims{Tenant: tenant, Scope: auth.ScopeRead + " " + auth.ScopePublish, Expiry: time.Now().Add(time.Hour).Unix()})
}
