package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/threadcast/threadcast/wire"
)

// tapRecord is one message of the tap stream, as a plain consumer reads it.
type tapRecord struct {
	seq     uint64
	subject string
	msgID   string
	data    []byte
}

// readTapStream reads every message of the tap stream with a plain
// ordered consumer (nothing of Threadcast's): what any NATS client sees.
func readTapStream(t testing.TB, js jetstream.JetStream, stream string) []tapRecord {
	t.Helper()
	cons, err := js.OrderedConsumer(t.Context(), stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	last := info.CachedInfo().State.LastSeq
	var out []tapRecord
	for len(out) == 0 || out[len(out)-1].seq < last {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("after %d of the tap stream's messages (last %d): %v", len(out), last, err)
		}
		meta, _ := m.Metadata()
		out = append(out, tapRecord{meta.Sequence.Stream, m.Subject(), m.Headers().Get(jetstream.MsgIDHeader), m.Data()})
	}
	return out
}

// runSummaries returns the run summaries of recs by run (thread, start
// seq, run id), each with how often it was stored.
func runSummaries(t testing.TB, recs []tapRecord) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, r := range recs {
		if !strings.HasPrefix(r.subject, wire.TapPrefix+".") || tokenAt(r.subject, 2) != wire.RunSummaryType {
			continue
		}
		var s RunSummary
		if err := json.Unmarshal(r.data, &s); err != nil {
			t.Fatalf("run summary %s: %v", r.data, err)
		}
		if r.msgID == "" {
			t.Errorf("run summary without %s: %s", jetstream.MsgIDHeader, r.data)
		}
		n[fmt.Sprintf("%s/%s@%d/%s", s.Tenant, s.Thread, s.StartSeq, s.RunID)]++
	}
	return n
}

// countRuns counts the runs of streams (their RUN_STARTED events).
func countRuns(streams []stream) int {
	n := 0
	for _, s := range streams {
		for _, e := range s.events {
			if strings.Contains(string(e), `"RUN_STARTED"`) {
				n++
			}
		}
	}
	return n
}

// TestTapStream checks that the tap stream keeps every tap message (each
// event and each run summary, TapKeepAll), with the stream's limits from the config,
// and that a second reduction of the same event log (a fresh consumer and
// bucket: every run summary published again, as after a crash) stores no
// run summary twice.
func TestTapStream(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.TapMaxAge, cfg.TapMaxBytes, cfg.TapDuplicates = time.Hour, 64<<20, 5*time.Minute
	cfg.TapKeep = TapKeepAll
	streams := genStreams(t, 40, "tap")
	runs := countRuns(streams)
	if runs == 0 {
		t.Fatal("the streams have no run")
	}
	ti := startIngest(t, nc, cfg)
	seqs := publishStreams(t, js, streams, 3)
	waitFor(t, 30*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })

	st, err := js.Stream(t.Context(), cfg.TapStream)
	if err != nil {
		t.Fatal(err)
	}
	sc := st.CachedInfo().Config
	if sc.MaxAge != time.Hour || sc.MaxBytes != 64<<20 || sc.Duplicates != 5*time.Minute || sc.Replicas != cfg.Replicas ||
		len(sc.Subjects) != 1 || sc.Subjects[0] != "tap.>" {
		t.Fatalf("tap stream config: %+v", sc)
	}
	if err := ti.stop(); err != nil {
		t.Fatal(err)
	}
	first := readTapStream(t, js, cfg.TapStream)
	sums := runSummaries(t, first)
	if len(sums) != runs {
		t.Fatalf("%d run summaries stored, want %d (one per run)", len(sums), runs)
	}
	for k, n := range sums {
		if n != 1 {
			t.Errorf("run %s stored %d times", k, n)
		}
	}
	events := 0
	for _, r := range first {
		if tokenAt(r.subject, 2) != wire.RunSummaryType {
			events++
		}
	}
	if events == 0 {
		t.Fatal("no event on the tap stream")
	}

	// Reduce the same log again from its start: every summary is
	// published again with the same id, and deduplicated.
	again := cfg
	again.ConsumerPrefix, again.Bucket = "again", "THREADCAST_VIEWS_AGAIN"
	again.Metrics = NewMetrics(nil)
	ti2 := startIngest(t, nc, again)
	waitFor(t, 30*time.Second, func() error {
		if d := testutil.ToFloat64(again.Metrics.TapPublished.WithLabelValues(tapDuplicate)); d != float64(runs) {
			return fmt.Errorf("%v duplicates acknowledged, want %d", d, runs)
		}
		return nil
	})
	if err := ti2.stop(); err != nil {
		t.Fatal(err)
	}
	second := readTapStream(t, js, cfg.TapStream)
	sums = runSummaries(t, second)
	if len(sums) != runs {
		t.Fatalf("after the second reduction: %d run summaries, want %d", len(sums), runs)
	}
	for k, n := range sums {
		if n != 1 {
			t.Errorf("after the second reduction: run %s stored %d times", k, n)
		}
	}
	if got, want := len(second)-len(first), events; got != want {
		t.Errorf("the second reduction added %d messages, want its %d events (events are at least once)", got, want)
	}
	if f := testutil.ToFloat64(again.Metrics.TapPublished.WithLabelValues(tapFailed)); f != 0 {
		t.Errorf("%v tap publishes failed", f)
	}
}

// TestTapStreamKeepsSummaries checks the default, TapKeepSummaries: the
// tap stream keeps each run summary once and no event, while the live tap
// still carries the events.
func TestTapStreamKeepsSummaries(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	if cfg.TapKeep != TapKeepSummaries {
		t.Fatalf("default TapKeep %q, want %q", cfg.TapKeep, TapKeepSummaries)
	}
	live, err := nc.SubscribeSync("tap.>")
	if err != nil {
		t.Fatal(err)
	}
	streams := genStreams(t, 20, "keep")
	runs := countRuns(streams)
	ti := startIngest(t, nc, cfg)
	seqs := publishStreams(t, js, streams, 3)
	waitFor(t, 30*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
	if err := ti.stop(); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), cfg.TapStream)
	if err != nil {
		t.Fatal(err)
	}
	if sub := st.CachedInfo().Config.Subjects; len(sub) != 1 || sub[0] != "tap.*.RUN_SUMMARY.*" {
		t.Fatalf("tap stream subjects %v", sub)
	}
	recs := readTapStream(t, js, cfg.TapStream)
	for _, r := range recs {
		if tokenAt(r.subject, 2) != wire.RunSummaryType {
			t.Fatalf("the tap stream kept %s", r.subject)
		}
	}
	sums := runSummaries(t, recs)
	if len(sums) != runs || len(recs) != runs {
		t.Fatalf("%d records, %d distinct run summaries, want %d", len(recs), len(sums), runs)
	}
	events := 0
	for {
		m, err := live.NextMsg(100 * time.Millisecond)
		if err != nil {
			break
		}
		if tokenAt(m.Subject, 2) != wire.RunSummaryType {
			events++
		}
	}
	if events == 0 {
		t.Fatal("the live tap carried no event")
	}
}

// TestRunSummaryMsgID checks the run summary's message id: the same for
// the same run, different when any of tenant, thread, start seq or run id
// differs, and unambiguous where the parts meet.
func TestRunSummaryMsgID(t *testing.T) {
	base := runSummaryMsgID("acme", "t1", 7, "r1")
	if base != runSummaryMsgID("acme", "t1", 7, "r1") {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{
		runSummaryMsgID("acme2", "t1", 7, "r1"), runSummaryMsgID("acme", "t2", 7, "r1"),
		runSummaryMsgID("acme", "t1", 8, "r1"), runSummaryMsgID("acme", "t1", 7, "r2"),
		runSummaryMsgID("acm", "et1", 7, "r1"),
	} {
		if other == base {
			t.Errorf("%s collides", other)
		}
	}
}

// TestTapStreamDown checks that a tap stream that cannot store (deleted
// under a running ingest: its publishes get no ack) costs the event log
// nothing: every view is complete, the live tap still gets every message,
// and the failures are counted.
func TestTapStreamDown(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.Metrics = NewMetrics(nil)
	cfg.TapKeep = TapKeepAll // every tap message goes to the stream, and fails
	ti := startIngest(t, nc, cfg)
	if err := js.DeleteStream(t.Context(), cfg.TapStream); err != nil {
		t.Fatal(err)
	}
	live, err := nc.SubscribeSync(wire.TapPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	streams := genStreams(t, 10, "down")
	seqs := publishStreams(t, js, streams, 1)
	waitFor(t, 30*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
	want := 0
	for _, s := range streams {
		want += len(s.events)
	}
	got := 0
	for {
		if _, err := live.NextMsg(time.Second); err != nil {
			break
		}
		got++
	}
	if got < want {
		t.Errorf("the live tap got %d messages, want at least the %d events", got, want)
	}
	waitFor(t, 30*time.Second, func() error {
		if f := testutil.ToFloat64(cfg.Metrics.TapPublished.WithLabelValues(tapFailed)); f < float64(want) {
			return fmt.Errorf("%v tap publishes counted failed, want at least %d", f, want)
		}
		return nil
	})
	if st := testutil.ToFloat64(cfg.Metrics.TapPublished.WithLabelValues(tapStored)); st != 0 {
		t.Errorf("%v tap publishes counted stored with no tap stream", st)
	}
	if err := ti.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestTapConfigValidate checks that the tap stream's settings are refused
// with ErrConfig when unusable, and accepted when the tap stream is off.
func TestTapConfigValidate(t *testing.T) {
	for name, bad := range map[string]func(c *Config){
		"keep":      func(c *Config) { c.TapKeep = "events" },
		"age":       func(c *Config) { c.TapMaxAge = 0 },
		"bytes":     func(c *Config) { c.TapMaxBytes = 0 },
		"dup":       func(c *Config) { c.TapDuplicates = 0 },
		"dup > age": func(c *Config) { c.TapDuplicates = c.TapMaxAge + time.Second },
		"in flight": func(c *Config) { c.TapMaxInFlight = 0 },
	} {
		c := DefaultConfig()
		bad(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate() = %v, want ErrConfig", name, err)
		}
		c.TapStream = ""
		if err := c.Validate(); err != nil {
			t.Errorf("%s with no tap stream: Validate() = %v", name, err)
		}
	}
	for _, keep := range []string{TapKeepSummaries, TapKeepAll} {
		c := DefaultConfig()
		c.TapKeep = keep
		if err := c.Validate(); err != nil {
			t.Errorf("TapKeep %q: %v", keep, err)
		}
	}
}
