package node

import (
	"log/slog"
	"sync"
	"time"
)

// rateLog lets through at most one log line per interval and counts the
// ones it holds back, reporting that count on the next line it lets
// through. NATS reports a slow consumer or a permissions error once per
// message in the worst case; a flood of those must not become a flood of
// log lines (a tap reader flood once wrote about 170,000 a second).
type rateLog struct {
	log      *slog.Logger
	interval time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newRateLog(log *slog.Logger, interval time.Duration) *rateLog {
	return &rateLog{log: log, interval: interval}
}

// Warn logs msg with args unless a line was let through within the
// interval; then it only counts it.
func (r *rateLog) Warn(msg string, args ...any) {
	now := time.Now()
	r.mu.Lock()
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	r.log.Warn(msg, args...)
}
