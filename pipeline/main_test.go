package pipeline

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// childEnv, when set to a NATS URL, turns the test binary into a bare
// ingest process (for the crash test, which kills it with SIGKILL).
const childEnv = "THREADCAST_TEST_INGEST_CHILD"

func TestMain(m *testing.M) {
	if url := os.Getenv(childEnv); url != "" {
		os.Exit(runChild(url))
	}
	os.Exit(m.Run())
}

// runChild runs ingest against url until killed; it prints "ready" once its
// consumers are bound.
func runChild(url string) int {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	cfg := crashConfig()
	cfg.Logger = discardLogger()
	in, err := NewIngest(nc, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	go func() {
		for !in.Ready() {
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Println("ready")
	}()
	if err := in.Run(context.Background(), time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// crashConfig checkpoints often, so that a kill lands between checkpoints
// of many threads.
func crashConfig() Config {
	cfg := DefaultConfig()
	cfg.Partitions = 16
	cfg.Shards = 2
	cfg.CheckpointEvery = 8
	cfg.CheckpointInterval = 20 * time.Millisecond
	cfg.MemoryBudget = 256 << 10 // small: eviction and reload happen under load too
	return cfg
}
