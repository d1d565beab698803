package pipeline

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/threadcast/threadcast/wire"
)

// The stage histograms see every event, and a frame says when it was sent
// (Tc-Sent) by the clock the test reads around it. Events carry their own
// timestamp, set before publishing, so each publish stage is at least
// what the clock says passed before the store (a negative or absurd value
// would show a wrong unit).
func TestStageHistograms(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg)
	const n = 5
	sub, err := nc.SubscribeSync(wire.ViewSubject("acme", wire.EncodeThread("stages")))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	evs := []string{`{"type":"RUN_STARTED","threadId":"stages","runId":"r","timestamp":%d}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant","timestamp":%d}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi","timestamp":%d}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m","timestamp":%d}`,
		`{"type":"RUN_FINISHED","threadId":"stages","runId":"r","timestamp":%d}`}
	subj, err := wire.EventSubject("acme", "stages")
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for _, e := range evs {
		ack, err := js.Publish(t.Context(), subj, fmt.Appendf(nil, e, time.Now().UnixMilli()))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	for seq := uint64(0); seq < last; {
		msg, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("frame after %d: %v", seq, err)
		}
		seq, _ = strconv.ParseUint(msg.Header.Get(wire.HeaderSeq), 10, 64)
		sent, err := strconv.ParseInt(msg.Header.Get(wire.HeaderSent), 10, 64)
		if err != nil || sent < before.UnixNano() || sent > time.Now().UnixNano() {
			t.Fatalf("frame %d: %s %q, want a Unix ns time since the test began", seq, wire.HeaderSent, msg.Header.Get(wire.HeaderSent))
		}
	}
	elapsed := time.Since(before).Seconds()
	waitFor(t, 5*time.Second, func() error {
		for _, st := range []string{StagePublish, StageConsume} {
			if c, sum := histogram(t, cfg.Metrics.Stage, st); c != n || sum < 0 || sum > float64(n)*elapsed {
				return fmt.Errorf("stage %s: %d samples summing to %v s, want %d within the %v s the test took", st, c, sum, n, elapsed)
			}
		}
		if c, sum := histogram(t, cfg.Metrics.Stage, StageFrame); c == 0 || c > n || sum < 0 || sum > float64(c)*elapsed {
			return fmt.Errorf("stage frame: %d samples summing to %v s, want 1 to %d", c, sum, n)
		}
		return nil
	})
}

func histogram(t *testing.T, v *prometheus.HistogramVec, label string) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(label).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}
