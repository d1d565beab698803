package node

// NOTE: the noisy-neighbour scenario, shared by TestNoisyNeighbour (counts)
// and BenchmarkNoisyNeighbour (latency, run by bench/ as "noisy"). One node
// with embedded NATS; tenant "quiet" publishes a steady load over NATS with
// the SDK into BThreads threads and reads each thread back over SSE, timing
// every event from Publish to its arrival; tenant "noisy" has an events/s
// quota and, in a noisy run, sends ten times it both to the bridge (JSONL
// bodies) and straight to NATS. The same quiet load runs with noisy silent
// and noisy loud.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/quota"
)

type noisyConfig struct {
	Duration time.Duration
	BThreads int
	BRate    float64 // quiet's events/s over all its threads
	AQuota   float64 // noisy's events/s quota (burst: one second's worth)
	ANoisy   bool    // noisy sends 10x AQuota to the bridge and 10x to NATS
}

type noisyResult struct {
	BSent, BDelivered, BDup, BLost int
	BViewsExact                    bool
	BP50, BP99                     time.Duration
	ABridgeSent, ABridgeAccepted   int
	ABridge429                     int
	ANatsSent                      int
	AShed                          float64 // threadcast_ingest_quota_shed_events_total{tenant="noisy"}
	ABridgeRefusedMetric           float64 // threadcast_bridge_quota_refused_total{tenant="noisy"}
}

// quietThread is one of quiet's threads: when each event was published and
// how often it arrived.
type quietThread struct {
	id   string
	sent []atomic.Int64 // Unix ns of Publish, per event index (0: not sent)
	seen []atomic.Int32
	lat  []time.Duration // filled by the reader only
}

func runNoisy(tb testing.TB, nc noisyConfig) noisyResult {
	tb.Helper()
	c := DefaultConfig()
	c.HTTP, c.NatsListen, c.DataDir = "127.0.0.1:0", "127.0.0.1:0", tb.TempDir()
	c.AuthKey = testKey
	c.Pipeline.Partitions = 4
	c.Drain = 10 * time.Second
	c.Logger = discard
	c.Quota.Tenants = map[string]quota.Limits{"noisy": {EventsPerSec: nc.AQuota, BodyBytesInFlight: 1 << 20}}
	n, err := Start(c)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := n.Stop(); err != nil {
			tb.Errorf("Stop: %v", err)
		}
	}()
	waitReady(tb, n)
	conn, err := nats.Connect(n.NatsURL())
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	pub, err := agent.New(conn, agent.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = pub.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), nc.Duration+60*time.Second)
	defer cancel()

	perThread := int(nc.BRate*nc.Duration.Seconds())/nc.BThreads + 1
	threads := make([]*quietThread, nc.BThreads)
	var readers sync.WaitGroup
	var readErr atomic.Value
	qtok := mint(tb, "quiet")
	for i := range threads {
		th := &quietThread{id: fmt.Sprintf("q%d", i), sent: make([]atomic.Int64, perThread), seen: make([]atomic.Int32, perThread)}
		threads[i] = th
		for _, ev := range []string{`{"type":"RUN_STARTED","threadId":"` + th.id + `","runId":"r"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`} {
			f, err := pub.Publish(ctx, "quiet", th.id, []byte(ev))
			if err == nil {
				_, err = f.Wait(ctx)
			}
			if err != nil {
				tb.Fatal(err)
			}
		}
		joined := make(chan struct{})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/v1/threads/"+th.id+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+qtok)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			tb.Fatalf("subscribe %s: %v %v", th.id, err, res)
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer res.Body.Close()
			if err := th.read(res.Body, joined, perThread); err != nil && ctx.Err() == nil {
				readErr.Store(err)
			}
		}()
		select {
		case <-joined:
		case <-ctx.Done():
			tb.Fatal("no join snapshot")
		}
	}

	var wg sync.WaitGroup
	var res noisyResult
	stop := make(chan struct{})
	if nc.ANoisy {
		wg.Add(2)
		go func() { defer wg.Done(); res.ANatsSent = noisyNats(conn, 10*nc.AQuota, stop) }()
		go func() {
			defer wg.Done()
			res.ABridgeSent, res.ABridgeAccepted, res.ABridge429 = noisyBridge(n.URL(), mint(tb, "noisy"), 10*nc.AQuota, stop)
		}()
	}
	// Quiet's steady load: round robin over its threads at BRate.
	tick := time.NewTicker(time.Duration(float64(time.Second) / nc.BRate))
	end := time.After(nc.Duration)
	sent := 0
publish:
	for i := 0; ; i++ {
		select {
		case <-end:
			break publish
		case <-tick.C:
		}
		th, k := threads[i%len(threads)], i/len(threads)
		if k >= perThread {
			break
		}
		th.sent[k].Store(time.Now().UnixNano())
		if _, err := pub.Publish(ctx, "quiet", th.id, []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"`+strconv.Itoa(k)+`;"}`)); err != nil {
			tb.Fatal(err)
		}
		sent++
	}
	tick.Stop()
	close(stop)
	wg.Wait()
	res.BSent = sent

	// Every published event must arrive; then the readers end with ctx.
	deadline := time.Now().Add(30 * time.Second)
	for delivered := 0; ; {
		delivered = 0
		for _, th := range threads {
			for k := range th.sent {
				if th.sent[k].Load() != 0 && th.seen[k].Load() > 0 {
					delivered++
				}
			}
		}
		if delivered == sent || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a late duplicate would arrive now
	cancel()
	readers.Wait()
	if err, _ := readErr.Load().(error); err != nil {
		tb.Fatalf("reader: %v", err)
	}
	var lats []time.Duration
	res.BViewsExact = true
	vctx, vcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer vcancel()
	for _, th := range threads {
		var want strings.Builder
		for k := range th.sent {
			if th.sent[k].Load() == 0 {
				continue
			}
			fmt.Fprintf(&want, "%d;", k)
			switch s := th.seen[k].Load(); {
			case s == 0:
				res.BLost++
			case s > 1:
				res.BDup += int(s - 1)
				res.BDelivered++
			default:
				res.BDelivered++
			}
		}
		lats = append(lats, th.lat...)
		if got := restContent(vctx, tb, n.URL(), qtok, th.id); got != want.String() {
			res.BViewsExact = false
			tb.Logf("thread %s: REST content %.80q, want %.80q", th.id, got, want.String())
		}
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		res.BP50, res.BP99 = lats[len(lats)/2], lats[min(len(lats)-1, len(lats)*99/100)]
	}
	settle(tb, n) // ingest has decided on every noisy message
	res.AShed = sumCounter(tb, n, "threadcast_ingest_quota_shed_events_total", "noisy")
	res.ABridgeRefusedMetric = sumCounter(tb, n, "threadcast_bridge_quota_refused_total", "noisy")
	return res
}

// read follows one quiet thread's SSE stream (agui mode): joined is closed
// at the join snapshot; each TEXT_MESSAGE_CONTENT's delta ("k;" runs, as
// compacted) marks its events seen and times them.
func (th *quietThread) read(r io.Reader, joined chan struct{}, n int) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var ev struct {
		Type  string `json:"type"`
		Delta string `json:"delta"`
	}
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		now := time.Now().UnixNano()
		ev.Type, ev.Delta = "", ""
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return fmt.Errorf("%s: %v in %.100q", th.id, err, line)
		}
		switch ev.Type {
		case "MESSAGES_SNAPSHOT":
			if joined != nil {
				close(joined)
				joined = nil
				continue
			}
			return fmt.Errorf("%s: a snapshot after the join (a resync): its content would be counted twice", th.id)
		case "TEXT_MESSAGE_CONTENT":
			for _, part := range strings.Split(strings.TrimSuffix(ev.Delta, ";"), ";") {
				k, err := strconv.Atoi(part)
				if err != nil || k < 0 || k >= n {
					return fmt.Errorf("%s: delta %q", th.id, ev.Delta)
				}
				th.seen[k].Add(1)
				if at := th.sent[k].Load(); at != 0 {
					th.lat = append(th.lat, time.Duration(now-at))
				}
			}
		}
	}
	return sc.Err()
}

// noisyNats publishes one event per message to a noisy thread straight to
// NATS (core publish: JetStream stores it) at rate until stop.
func noisyNats(nc *nats.Conn, rate float64, stop <-chan struct{}) int {
	subj := "agui.noisy.nats.events"
	_ = nc.Publish(subj, []byte(`{"type":"RUN_STARTED","threadId":"nats","runId":"r"}`))
	_ = nc.Publish(subj, []byte(`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`))
	return paced(rate, 10, stop, func(i int) {
		_ = nc.Publish(subj, []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"`+strconv.Itoa(i)+`;"}`))
	}) + 2
}

// noisyBridge posts JSONL bodies of 50 events to a noisy thread at rate
// events/s until stop: events sent, accepted, and 429 answers.
func noisyBridge(url, tok string, rate float64, stop <-chan struct{}) (sent, accepted, refused int) {
	const per = 50
	var body strings.Builder
	post := func(b string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/ingest/noisy/bridge", strings.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		var br struct {
			Accepted int `json:"accepted"`
		}
		_ = json.NewDecoder(res.Body).Decode(&br)
		res.Body.Close()
		accepted += br.Accepted
		if res.StatusCode == http.StatusTooManyRequests {
			refused++
		}
	}
	post(`{"type":"RUN_STARTED","threadId":"bridge","runId":"r"}` + "\n" + `{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}` + "\n")
	sent = 2
	paced(rate/per, 1, stop, func(i int) {
		body.Reset()
		for k := 0; k < per; k++ {
			fmt.Fprintf(&body, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"%d;"}`+"\n", i*per+k)
		}
		post(body.String())
		sent += per
	})
	return sent, accepted, refused
}

// paced calls f(i) rate times a second, in bursts of burst, until stop; it
// returns the calls made.
func paced(rate float64, burst int, stop <-chan struct{}, f func(i int)) int {
	tick := time.NewTicker(time.Duration(float64(burst) * float64(time.Second) / rate))
	defer tick.Stop()
	i := 0
	for {
		select {
		case <-stop:
			return i
		case <-tick.C:
			for k := 0; k < burst; k++ {
				f(i)
				i++
			}
		}
	}
}

// restContent is the content of message m of thread id, by REST.
func restContent(ctx context.Context, tb testing.TB, url, tok, id string) string {
	tb.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/threads/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	var v struct {
		View struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		} `json:"view"`
	}
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil || len(v.View.Messages) != 1 {
		tb.Fatalf("view of %s: %v, %d messages", id, err, len(v.View.Messages))
	}
	return v.View.Messages[0].Content
}

// settle waits until ingest has no message waiting and the shed counter
// has stopped moving.
func settle(tb testing.TB, n *Node) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last := -1.0
	for time.Now().Before(deadline) {
		v := sumCounter(tb, n, "threadcast_ingest_quota_shed_events_total", "noisy")
		if n.in.Lag() == 0 && v == last {
			return
		}
		last = v
		time.Sleep(300 * time.Millisecond)
	}
	tb.Fatal("ingest did not settle")
}

// sumCounter sums family name's series whose tenant label is tenant.
func sumCounter(tb testing.TB, n *Node, name, tenant string) float64 {
	tb.Helper()
	mfs, err := n.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "tenant" && lp.GetValue() == tenant {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func waitReady(tb testing.TB, n *Node) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(n.URL() + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatal("node not ready")
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
}

func mint(tb testing.TB, tenant string) string {
	tb.Helper()
	tok, err := auth.Mint(testKey, auth.Claims{Tenant: tenant, Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

var discard = slog.New(slog.DiscardHandler)

// BenchmarkNoisyNeighbour runs the quiet load with tenant noisy silent and
// then at ten times its quota, in alternating rounds, and reports quiet's
// publish→delivery p99 of each (ms), their ratio (noisy/quiet, median over
// rounds), what quiet lost or duplicated, and noisy's refused and shed
// events. b.N is ignored: each round is a fixed-length run.
func BenchmarkNoisyNeighbour(b *testing.B) {
	cfg := noisyConfig{Duration: 5 * time.Second, BThreads: 8, BRate: 400, AQuota: 100}
	rounds := 5
	var ratios, quietP99, noisyP99 []float64
	var lost, dup, refused, accepted, shed, natsSent, bridgeSent float64
	for b.Loop() {
		for r := 0; r < rounds; r++ {
			cfg.ANoisy = false
			q := runNoisy(b, cfg)
			cfg.ANoisy = true
			nz := runNoisy(b, cfg)
			quietP99 = append(quietP99, ms(q.BP99))
			noisyP99 = append(noisyP99, ms(nz.BP99))
			ratios = append(ratios, ms(nz.BP99)/ms(q.BP99))
			lost += float64(q.BLost + nz.BLost)
			dup += float64(q.BDup + nz.BDup)
			refused += float64(nz.ABridgeSent - nz.ABridgeAccepted)
			accepted += float64(nz.ABridgeAccepted)
			shed += nz.AShed
			natsSent += float64(nz.ANatsSent)
			bridgeSent += float64(nz.ABridgeSent)
			b.Logf("round %d: quiet p50 %v p99 %v | noisy p50 %v p99 %v | bridge %d sent %d accepted %d×429 | nats %d sent %.0f shed",
				r, q.BP50, q.BP99, nz.BP50, nz.BP99, nz.ABridgeSent, nz.ABridgeAccepted, nz.ABridge429, nz.ANatsSent, nz.AShed)
		}
	}
	b.ReportMetric(median(quietP99), "quiet_p99_ms")
	b.ReportMetric(median(noisyP99), "noisy_p99_ms")
	b.ReportMetric(median(ratios), "p99_ratio")
	b.ReportMetric(median(noisyP99)/median(quietP99), "p99_ratio_of_medians")
	b.ReportMetric(lost, "b_lost")
	b.ReportMetric(dup, "b_dup")
	b.ReportMetric(bridgeSent, "a_bridge_sent")
	b.ReportMetric(refused, "a_bridge_refused")
	b.ReportMetric(natsSent, "a_nats_sent")
	b.ReportMetric(shed, "a_nats_shed")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
