//go:build integration

package pipeline

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// startChild starts this test binary as a bare ingest process (TestMain,
// childEnv) and waits until its consumers are bound.
func startChild(t *testing.T, url string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+url)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				ready <- nil
				break
			}
		}
		ready <- fmt.Errorf("child exited before ready: %v", sc.Err())
		for sc.Scan() { // keep draining so the child never blocks on stdout
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("child not ready")
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// TestCrashRecovery kills an ingest process with SIGKILL in the middle of a
// 1,000-thread load, restarts it, and checks that every view equals the
// offline reduction of its whole stream: no event lost, none applied twice.
// Run: go test -tags integration -race -run TestCrashRecovery ./pipeline
func TestCrashRecovery(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := crashConfig()
	streams := genStreams(t, 1000, "c")
	seqs := map[string][]uint64{}

	child := startChild(t, s.ClientURL())
	mustInterleave(t, js, streams, 0, 8, 1, seqs)

	// Publish the middle of every stream while the child works; kill it
	// once it has applied part of it.
	var wg sync.WaitGroup
	mid := map[string][]uint64{}
	var midErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		midErr = interleaved(js, streams, 8, 20, 2, mid)
	}()
	waitFor(t, 60*time.Second, func() error {
		st, err := js.Stream(t.Context(), cfg.Stream)
		if err != nil {
			return err
		}
		var ackedParts, inFlight int
		for _, p := range cfg.OwnedPartitions() {
			c, err := st.Consumer(t.Context(), cfg.ConsumerName(p))
			if err != nil {
				return err
			}
			i := c.CachedInfo()
			if i.AckFloor.Stream > 0 {
				ackedParts++
			}
			inFlight += i.NumAckPending
		}
		// Mid-load: most partitions have acked (checkpointed) something,
		// and there is delivered, un-acked work.
		if ackedParts < len(cfg.OwnedPartitions())*3/4 || inFlight == 0 {
			return fmt.Errorf("%d partitions acked, %d in flight", ackedParts, inFlight)
		}
		return nil
	})
	if err := child.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = child.Wait()
	t.Logf("killed ingest mid-load: %s", consumerState(t, js, &cfg))
	wg.Wait()
	if midErr != nil {
		t.Fatal(midErr)
	}
	for k, v := range mid {
		seqs[k] = append(seqs[k], v...)
	}

	startChild(t, s.ClientURL())
	mustInterleave(t, js, streams, 20, 1000, 3, seqs)
	checkViews(t, nc, cfg.Partitions, streams, seqs)
}

// consumerState sums the partitions' delivered and acked stream positions.
func consumerState(t *testing.T, js jetstream.JetStream, cfg *Config) string {
	st, err := js.Stream(t.Context(), cfg.Stream)
	if err != nil {
		return err.Error()
	}
	var delivered, floor, pending uint64
	for _, p := range cfg.OwnedPartitions() {
		c, err := st.Consumer(t.Context(), cfg.ConsumerName(p))
		if err != nil {
			return err.Error()
		}
		i := c.CachedInfo()
		delivered += i.Delivered.Stream
		floor += i.AckFloor.Stream
		pending += uint64(i.NumAckPending)
	}
	return fmt.Sprintf("ack pending %d messages (sum of delivered %d, ack floors %d); stream has %d", pending, delivered, floor, st.CachedInfo().State.Msgs)
}
