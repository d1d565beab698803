package pipeline

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// startLeased runs a LeasedIngest (one holder, so it takes every partition)
// until the test ends, and waits until it holds and serves them all.
func startLeased(tb testing.TB, nc *nats.Conn, cfg Config) {
	tb.Helper()
	lc := DefaultLeaseConfig()
	lc.Holder, lc.TTL, lc.Logger = "bench", 5*time.Second, discardLogger()
	li, err := NewLeasedIngest(nc, cfg, lc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- li.Run(ctx, 10*time.Second) }()
	tb.Cleanup(func() { cancel(); <-done })
	waitFor(tb, 30*time.Second, func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("leased ingest ended: %v", err)
		default:
		}
		if len(li.Held()) != cfg.Partitions || !li.Ready() {
			return errors.New("not all partitions held and ready")
		}
		return nil
	})
}

// BenchmarkIngestLeased is BenchmarkIngest in lease mode (one Ingest with
// one shard per partition instead of Shards shards for all), against the
// static mode in the same run (BenchmarkIngest's runIngestLoad).
//
//	go test -run '^$' -bench 'BenchmarkIngestLeased' -benchtime 20000x ./pipeline
func BenchmarkIngestLeased(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("mode=static/batch=%d", batch), func(b *testing.B) {
			msgs, events := benchLoad(b.N, batch)
			runIngestLoad(b, msgs, events, 0, tapOff).report(b)
		})
		b.Run(fmt.Sprintf("mode=lease/batch=%d", batch), func(b *testing.B) {
			msgs, events := benchLoad(b.N, batch)
			runIngestLoadWith(b, msgs, events, 0, tapOff, startLeased).report(b)
		})
	}
}
