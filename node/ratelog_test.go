package node

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRateLog: a burst of warnings writes one line per interval, and the
// next line says how many were held back.
func TestRateLog(t *testing.T) {
	var buf bytes.Buffer
	// The interval is long enough for the burst to fit in it under -race
	// on a loaded machine.
	r := newRateLog(slog.New(slog.NewTextHandler(&buf, nil)), time.Second)
	for range 10000 {
		r.Warn("nats async error", "err", "slow consumer")
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines for a burst, want 1:\n%s", n, buf.String())
	}
	time.Sleep(1100 * time.Millisecond)
	r.Warn("nats async error", "err", "slow consumer")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "suppressed=9999") {
		t.Fatalf("want a second line reporting 9999 suppressed:\n%s", buf.String())
	}
}
