package pipeline

// NOTE: what the bridge and /readyz know about storage. JetStream refuses a
// write over its own store limit at once (API error 10023 "insufficient
// resources"), but a disk that fills up with other files gives it ENOSPC:
// nats-server then logs a critical write error, never answers that publish
// and stops writing that stream until it is restarted. So the watch does
// two things: it polls the free space of the store's file system and calls
// storage full below a headroom (before ENOSPC), and it takes reports of
// JetStream's storage refusals from the bridge's publishes. Either makes
// Check fail, with the reason, until the free space is back above the
// headroom and RetryAfter has passed since the last refusal.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrStorageFull is wrapped by StorageWatch.Check's error while storage is
// full.
var ErrStorageFull = errors.New("pipeline: event storage full")

// StorageError is Check's error: why storage counts as full, and when to
// retry.
type StorageError struct {
	Reason     string
	RetryAfter time.Duration
}

func (e *StorageError) Error() string { return ErrStorageFull.Error() + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrStorageFull) hold.
func (e *StorageError) Unwrap() error { return ErrStorageFull }

// RetryAfterSeconds is the Retry-After value, at least 1.
func (e *StorageError) RetryAfterSeconds() string {
	return strconv.Itoa(max(1, int((e.RetryAfter+time.Second-1)/time.Second)))
}

// StorageConfig configures a StorageWatch.
type StorageConfig struct {
	// Dir is a directory on the file system of the JetStream store (the
	// embedded server's); empty: the free space is not watched (an
	// external server's disk is its operator's), and only reported
	// refusals count.
	Dir string
	// MinFree is the headroom: less free space than this on Dir's file
	// system counts as full. Zero: DefaultStoreMinFree.
	MinFree uint64
	// Every is the polling interval of the free space. Zero: 1 s.
	Every time.Duration
	// RetryAfter is how long a reported refusal makes Check fail, and the
	// Retry-After the bridge sends. Zero: 5 s.
	RetryAfter time.Duration
	// Logger receives the transitions (full, and back); nil: slog.Default().
	Logger *slog.Logger
}

// DefaultStoreMinFree is StorageConfig.MinFree's default: 256 MiB.
const DefaultStoreMinFree = 256 << 20

// StorageWatch says whether the event storage can take writes. Build it
// with NewStorageWatch; Run polls the free space until its ctx ends (the
// caller owns the goroutine); Check, Report and Full are safe for
// concurrent use.
type StorageWatch struct {
	cfg  StorageConfig
	log  *slog.Logger
	free func(dir string) (uint64, error) // statfs

	mu      sync.Mutex    // a leaf
	diskLow string        // why the disk counts as full; "" when it does not
	refused string        // the last reported refusal
	until   time.Time     // the reported refusal counts until then
	broken  string        // a critical write error of the server: final
	isFull  bool          // the state last logged
	fullC   chan struct{} // closed when storage becomes full; replaced when it has room again
}

// NewStorageWatch returns a StorageWatch for cfg.
func NewStorageWatch(cfg StorageConfig) *StorageWatch {
	if cfg.MinFree == 0 {
		cfg.MinFree = DefaultStoreMinFree
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &StorageWatch{cfg: cfg, log: log, free: freeBytes, fullC: make(chan struct{})}
}

// Run polls the free space every StorageConfig.Every until ctx ends. It
// returns at once without a Dir.
func (w *StorageWatch) Run(ctx context.Context) {
	if w.cfg.Dir == "" {
		return
	}
	t := time.NewTicker(w.cfg.Every)
	defer t.Stop()
	for {
		w.Poll()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll checks the free space once (Run calls it; callers may too).
func (w *StorageWatch) Poll() {
	if w.cfg.Dir == "" {
		return
	}
	free, err := w.free(w.cfg.Dir)
	low := ""
	switch {
	case errors.Is(err, errNoStatfs):
	case err != nil:
		w.log.Warn("storage: cannot read the free space", "dir", w.cfg.Dir, "err", err)
	case free < w.cfg.MinFree:
		low = fmt.Sprintf("%d bytes free on the file system of %s, under the headroom of %d (--store-min-free)", free, w.cfg.Dir, w.cfg.MinFree)
	}
	w.mu.Lock()
	w.diskLow = low
	w.transitionLocked(time.Now())
	w.mu.Unlock()
}

// Report records a write refused by JetStream, if err is a storage
// refusal (IsStorageError); it reports whether it was.
func (w *StorageWatch) Report(err error) bool {
	if !IsStorageError(err) {
		return false
	}
	now := time.Now()
	w.mu.Lock()
	w.refused = err.Error()
	w.until = now.Add(w.cfg.RetryAfter)
	w.transitionLocked(now)
	w.mu.Unlock()
	return true
}

// ReportWriteError records a critical write error of the embedded server
// (natsembed.Config.OnWriteError; line is its log line): nats-server writes
// that stream again only after a restart, so from now on Check fails with
// that reason, and /readyz with it, until the process restarts.
func (w *StorageWatch) ReportWriteError(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != "" {
		return
	}
	w.broken = "nats-server stopped writing after a critical write error (it writes again only after a restart): " + line
	w.transitionLocked(time.Now())
}

// Check returns nil when storage can take writes, else a *StorageError
// (wrapping ErrStorageFull) with the reason.
func (w *StorageWatch) Check() error {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.transitionLocked(now)
	switch {
	case w.broken != "":
		return &StorageError{Reason: w.broken, RetryAfter: w.cfg.RetryAfter}
	case w.diskLow != "":
		return &StorageError{Reason: w.diskLow, RetryAfter: w.cfg.RetryAfter}
	case now.Before(w.until):
		return &StorageError{Reason: "JetStream refused a write: " + w.refused, RetryAfter: time.Until(w.until)}
	}
	return nil
}

// transitionLocked logs a change of state. Called with w.mu held.
func (w *StorageWatch) transitionLocked(now time.Time) {
	full := w.broken != "" || w.diskLow != "" || now.Before(w.until)
	if full == w.isFull {
		return
	}
	w.isFull = full
	if full {
		close(w.fullC)
		reason := w.broken + w.diskLow
		if reason == "" {
			reason = w.refused
		}
		w.log.Error("storage full: the bridge refuses writes and /readyz fails until it has room", "reason", reason)
		return
	}
	w.fullC = make(chan struct{})
	w.log.Info("storage has room again: writes accepted")
}

// Full returns a channel that is closed when storage becomes full (now,
// if it is): a request waiting for acks stops waiting there.
func (w *StorageWatch) Full() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.transitionLocked(time.Now())
	return w.fullC
}

// IsStorageError reports whether err (from a JetStream publish, or a
// Publisher's ErrPublish wrapping one) says the store is out of room:
// insufficient resources (10023), storage resources exceeded (10047), a
// store failure (10077), or ENOSPC.
func IsStorageError(err error) bool {
	if err == nil {
		return false
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case 10023, 10047, 10077:
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "insufficient resources") || strings.Contains(msg, "no space left on device") ||
		strings.Contains(msg, "insufficient storage")
}

// errNoStatfs: this platform cannot read a file system's free space.
var errNoStatfs = errors.New("pipeline: free space unknown on this platform")
