package fanout

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The fanout's stage histograms time real frames: transit from ingest's
// Tc-Sent, deliver to the write of each batch a reader gets, and neither
// beyond the time the test took.
func TestStageHistograms(t *testing.T) {
	s, base, js := startBackpressureServer(t, 1<<20, 32<<10)
	const thread = "stage-thread"
	tok := token(t, "acme")
	evs := backpressureStream(thread, 1, 20)
	first := publishFirst(t, js, base, tok, thread, evs[0])
	r := openReader(t, http.DefaultClient, base, tok, thread, false)
	if err := r.readUntil(seqIs(first)); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	last := publishAll(t, js, thread, evs[1:], time.Millisecond)
	if err := r.readUntil(seqIs(last)); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(began).Seconds()
	for _, st := range []string{StageTransit, StageDeliver} {
		c, sum := histogram(t, s.Metrics().Stage.WithLabelValues(st).(prometheus.Histogram))
		if c == 0 || sum < 0 || sum > float64(c)*elapsed {
			t.Errorf("stage %s: %d samples summing to %v s, want some, each within the %v s the frames took", st, c, sum, elapsed)
		}
	}
}
