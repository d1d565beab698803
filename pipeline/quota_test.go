package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// noisyStream is a run with one message of n content events: structure
// first and last, content between (the content is what a quota sheds).
func noisyStream(n int) []json.RawMessage {
	evs := []json.RawMessage{
		json.RawMessage(`{"type":"RUN_STARTED","threadId":"x","runId":"r1"}`),
		json.RawMessage(`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`),
	}
	for i := 0; i < n; i++ {
		evs = append(evs, json.RawMessage(fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"%d;"}`, i)))
	}
	return append(evs,
		json.RawMessage(`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`),
		json.RawMessage(`{"type":"RUN_FINISHED","threadId":"x","runId":"r1"}`))
}

// expectShed is an independent model of the ingest's rule: per second of
// stored time, at most rate+burst events of the tenant are applied, and
// structural ones up to twice that.
func expectShed(events []json.RawMessage, times []time.Time, budget int) []bool {
	shed := make([]bool, len(events))
	var sec int64
	count := 0
	for i, ev := range events {
		if s := times[i].Unix(); s > sec {
			sec, count = s, 0
		}
		limit := budget
		if !bytes.Contains(ev, []byte(`"TEXT_MESSAGE_CONTENT"`)) {
			limit = 2 * budget
		}
		if count+1 > limit {
			shed[i] = true
			continue
		}
		count++
	}
	return shed
}

// offlineShedView reduces events offline, a shed event counted as a
// warning at its seq, as the ingest must.
func offlineShedView(t *testing.T, id string, events []json.RawMessage, seqs []uint64, shed []bool) map[string]any {
	t.Helper()
	th := reducer.NewThread(id)
	var dec codec.Decoder
	var ev codec.Event
	for i, raw := range events {
		if shed[i] {
			th.Warn(seqs[i], reducer.Warning{Code: "quota", Seq: seqs[i]})
			continue
		}
		if err := dec.Decode(bytes.Clone(raw), &ev); err != nil {
			t.Fatal(err)
		}
		th.Apply(seqs[i], &ev)
	}
	return viewOf(t, th.AppendView(nil))
}

// TestIngestShedsOverQuota publishes a noisy tenant's run far over its
// events/s and a quiet tenant's within none: the noisy one's excess content
// is shed (dead letter naming the quota, the metric, a warning in the view,
// the view the offline fold of the rest); its run still ends; the quiet
// tenant loses nothing; and a full replay into a fresh bucket decides the
// same.
func TestIngestShedsOverQuota(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	const budget = 10 // rate 5/s + burst 5
	cfg.Quota.Tenants = map[string]quota.Limits{"noisy": {EventsPerSec: 5, EventsBurst: 5}}
	reg := prometheus.NewRegistry()
	cfg.Metrics = NewMetrics(reg)

	var mu sync.Mutex
	var dead []*nats.Msg
	sub, err := nc.Subscribe(wire.DLQPrefix+".>", func(m *nats.Msg) { mu.Lock(); dead = append(dead, m); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ti := startIngest(t, nc, cfg)

	noisy := stream{tenant: "noisy", thread: "loud", events: withThread(noisyStream(60), "loud")}
	quiet := stream{tenant: "quiet", thread: "calm", events: withThread(noisyStream(60), "calm")}
	seqs := publishStreams(t, js, []stream{noisy, quiet}, 1)
	ns := seqs["noisy/loud"]

	// The stored times decide; read them back from the stream.
	st, err := js.Stream(context.Background(), cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	times := make([]time.Time, len(ns))
	for i, seq := range ns {
		m, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		times[i] = m.Time
	}
	shed := expectShed(noisy.events, times, budget)
	nShed := 0
	for _, s := range shed {
		if s {
			nShed++
		}
	}
	if nShed < 60-2*budget { // 60 content events span at most two seconds here
		t.Fatalf("the model sheds %d of 60: the test published too slowly to be over quota", nShed)
	}

	checkShed := func(t *testing.T, parts int) map[string]any {
		t.Helper()
		var snap wire.Snapshot
		waitFor(t, 30*time.Second, func() error {
			snap, err = snapshot(nc, parts, "noisy", "loud")
			if err == nil && snap.Seq != ns[len(ns)-1] {
				err = fmt.Errorf("seq %d, want %d", snap.Seq, ns[len(ns)-1])
			}
			return err
		})
		got, want := viewOf(t, snap.View), offlineShedView(t, "loud", noisy.events, ns, shed)
		if !reflect.DeepEqual(got, want) {
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			t.Fatalf("noisy view differs\n got %s\nwant %s", gb, wb)
		}
		return got
	}
	first := checkShed(t, cfg.Partitions)
	if first["status"] != "finished" {
		t.Errorf("noisy thread status %v: shedding content must not break the run", first["status"])
	}
	checkViews(t, nc, cfg.Partitions, []stream{quiet}, seqs)

	// Dead letters: one per shed event, naming the quota; none for quiet.
	waitFor(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(dead) != nShed {
			return fmt.Errorf("%d dead letters, want %d", len(dead), nShed)
		}
		return nil
	})
	mu.Lock()
	for _, m := range dead {
		if m.Subject != wire.DLQSubject("noisy", wire.EncodeThread("loud")) || m.Header.Get(wire.HeaderErrorKind) != wire.ErrKindQuota ||
			m.Header.Get(wire.HeaderQuota) != "events_per_sec" || !bytes.Contains(m.Data, []byte("TEXT_MESSAGE_CONTENT")) {
			t.Errorf("dead letter %s %v %s", m.Subject, m.Header, m.Data)
		}
	}
	mu.Unlock()
	if got := gatherCounter(t, reg, "threadcast_ingest_quota_shed_events_total", "noisy", "events_per_sec"); got != float64(nShed) {
		t.Errorf("shed metric %v, want %d", got, nShed)
	}
	if got := gatherCounter(t, reg, "threadcast_ingest_quota_shed_events_total", "quiet", "events_per_sec"); got != 0 {
		t.Errorf("quiet tenant shed %v", got)
	}
	if err := ti.stop(); err != nil {
		t.Fatal(err)
	}

	// Replay everything into a fresh bucket with fresh consumers: the same
	// decisions, the same view.
	cfg2 := cfg
	cfg2.Bucket, cfg2.ConsumerPrefix = "REPLAY", "replay"
	cfg2.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg2)
	if again := checkShed(t, cfg2.Partitions); !reflect.DeepEqual(again, first) {
		t.Fatal("the replay's view differs")
	}
}

func gatherCounter(t *testing.T, reg prometheus.Gatherer, name, tenant, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "tenant") == tenant && label(m, "quota") == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func TestAckReplyTime(t *testing.T) {
	tests := []struct {
		give string
		want int64
		ok   bool
	}{
		{"$JS.ACK.S.C.1.42.7.1700000000123456789.0", 1700000000123456789, true},
		{"$JS.ACK.dom.hash.S.C.1.42.7.1700000000123456789.0.tok", 1700000000123456789, true},
		{"$JS.ACK.S.C.1.42.7", 0, false},
		{"_INBOX.x", 0, false},
		{"$JS.ACK.S.C.1.42.7.notanumber.0", 0, false},
	}
	for _, tt := range tests {
		got, ok := ackReplyTime(tt.give)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ackReplyTime(%q) = %d, %v; want %d, %v", tt.give, got, ok, tt.want, tt.ok)
		}
	}
}

// TestIngestShedsOverRetained: with the retained check reporting the
// tenant over quota, its events are shed with that quota named.
func TestIngestShedsOverRetained(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	over := &quota.ExceededError{Tenant: "full", Kind: quota.KindRetained, Limit: 1}
	cfg.Retained = func(tenant string) error {
		if tenant == "full" {
			return over
		}
		return nil
	}
	dl, err := nc.SubscribeSync(wire.DLQSubject("full", wire.EncodeThread("t")))
	if err != nil {
		t.Fatal(err)
	}
	startIngest(t, nc, cfg)
	seqs := publishStreams(t, js, []stream{{tenant: "full", thread: "t", events: withThread(noisyStream(1), "t")},
		{tenant: "ok", thread: "t", events: withThread(noisyStream(1), "t")}}, 1)
	for i := 0; i < len(noisyStream(1)); i++ {
		m, err := dl.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("dead letter %d: %v", i, err)
		}
		if m.Header.Get(wire.HeaderQuota) != "events_retained" || m.Header.Get(wire.HeaderErrorKind) != wire.ErrKindQuota {
			t.Fatalf("dead letter %v", m.Header)
		}
	}
	checkViews(t, nc, cfg.Partitions, []stream{{tenant: "ok", thread: "t", events: withThread(noisyStream(1), "t")}}, seqs)
	var snap wire.Snapshot
	waitFor(t, 10*time.Second, func() error {
		var err error
		if snap, err = snapshot(nc, cfg.Partitions, "full", "t"); err == nil && snap.Seq != seqs["full/t"][len(seqs["full/t"])-1] {
			err = fmt.Errorf("seq %d", snap.Seq)
		}
		return err
	})
	v := viewOf(t, snap.View)
	want := offlineShedView(t, "t", withThread(noisyStream(1), "t"), seqs["full/t"], []bool{true, true, true, true, true})
	if !reflect.DeepEqual(v, want) || v["status"] != "idle" {
		t.Errorf("the shed thread's view %s, want nothing applied (%v)", snap.View, want)
	}
}

// TestIngestShedsOverBytes: content over a tenant's bytes/s is shed with
// bytes_per_sec named; dead letters and the metric agree, and every event
// is either applied or shed.
func TestIngestShedsOverBytes(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.Quota.Tenants = map[string]quota.Limits{"wide": {BytesPerSec: 100, BytesBurst: 100}}
	reg := prometheus.NewRegistry()
	cfg.Metrics = NewMetrics(reg)
	dl, err := nc.SubscribeSync(wire.DLQSubject("wide", wire.EncodeThread("t")))
	if err != nil {
		t.Fatal(err)
	}
	startIngest(t, nc, cfg)
	evs := withThread(noisyStream(30), "t") // 30 content events of ~70 bytes: far over 200 bytes a second
	seqs := publishStreams(t, js, []stream{{tenant: "wide", thread: "t", events: evs}}, 1)
	var snap wire.Snapshot
	waitFor(t, 30*time.Second, func() error {
		var err error
		if snap, err = snapshot(nc, cfg.Partitions, "wide", "t"); err == nil && snap.Seq != seqs["wide/t"][len(evs)-1] {
			err = fmt.Errorf("seq %d", snap.Seq)
		}
		return err
	})
	shed := 0
	for {
		m, err := dl.NextMsg(500 * time.Millisecond)
		if err != nil {
			break
		}
		if m.Header.Get(wire.HeaderQuota) != "bytes_per_sec" || m.Header.Get(wire.HeaderErrorKind) != wire.ErrKindQuota {
			t.Fatalf("dead letter %v", m.Header)
		}
		shed++
	}
	if shed == 0 {
		t.Fatal("nothing shed")
	}
	if got := gatherCounter(t, reg, "threadcast_ingest_quota_shed_events_total", "wide", "bytes_per_sec"); got != float64(shed) {
		t.Errorf("metric %v, %d dead letters", got, shed)
	}
	v := viewOf(t, snap.View)
	content := v["messages"].([]any)[0].(map[string]any)["content"].(string)
	if applied := strings.Count(content, ";"); applied+shed != 30 || v["warnings"] != float64(shed) {
		t.Errorf("%d applied + %d shed != 30, warnings %v", applied, shed, v["warnings"])
	}
}
