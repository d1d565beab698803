package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestShutdownReportsFailedCheckpoints: when the server refuses the
// checkpoint writes (here the bucket is over its size limit, which the
// server enforces as it does a full store), Run's graceful stop says so
// with ErrUncheckpointed instead of reporting success; the events stay
// un-acked for the next start.
func TestShutdownReportsFailedCheckpoints(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.KVMaxBytes = 1024 // a floor or two, never a view of these threads
	cfg.CheckpointInterval = 20 * time.Millisecond
	streams := genStreams(t, 10, "full")
	ti := startIngest(t, nc, cfg)
	seqs := publishStreams(t, js, streams, 1)
	waitFor(t, 20*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
	err := ti.stop()
	if !errors.Is(err, ErrUncheckpointed) {
		t.Fatalf("Run returned %v, want ErrUncheckpointed", err)
	}
	t.Log(err)
}
