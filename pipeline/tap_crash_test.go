//go:build integration

package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestCrashTapExactlyOnce kills an ingest process with SIGKILL in the
// middle of a load of many runs, after runs have ended whose checkpoints
// the bucket refused (so that the replay ends them again), restarts it,
// and reads the tap stream with a plain nats.go consumer (readTapStream;
// the summaries parsed as plain JSON): every run has exactly one run
// summary, although the replayed tail published again what the killed
// process had published, and the live tap saw more summaries than runs.
// Run: go test -tags integration -race -run TestCrashTapExactlyOnce ./pipeline
func TestCrashTapExactlyOnce(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := crashConfig()
	streams := genStreams(t, 600, "k")
	seqs := map[string][]uint64{}

	// The live tap sees every publication of a run summary: the killed
	// process's and the replay's.
	var published atomic.Int64
	sub, err := nc.Subscribe("tap.*.RUN_SUMMARY.*", func(*nats.Msg) { published.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	child := startChild(t, s.ClientURL())
	mustInterleave(t, js, streams, 0, 8, 1, seqs)
	// Every thread holds one run, which its last event ends. Half the
	// threads' last events are held back until checkpoints are refused
	// (below), so that runs end after that whatever the ingest's pace:
	// otherwise it may have ended every run by then.
	var early, late []stream
	for i, st := range streams {
		if i%2 == 0 {
			early = append(early, st)
			continue
		}
		n := len(st.events) - 1
		early = append(early, stream{st.tenant, st.thread, st.events[:n]})
		late = append(late, stream{st.tenant, st.thread, st.events[n:]})
	}
	var wg sync.WaitGroup
	mid := map[string][]uint64{}
	var midErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		midErr = interleaved(js, early, 8, 1000, 2, mid)
	}()
	// Killed once runs have ended (their summaries published) while
	// messages are in flight: the replayed tail holds run ends.
	waitFor(t, 60*time.Second, func() error {
		if n := published.Load(); n < 100 {
			return fmt.Errorf("%d run summaries published", n)
		}
		ts, err := js.Stream(t.Context(), cfg.Stream)
		if err != nil {
			return err
		}
		inFlight := 0
		for _, p := range cfg.OwnedPartitions() {
			c, err := ts.Consumer(t.Context(), cfg.ConsumerName(p))
			if err != nil {
				return err
			}
			inFlight += c.CachedInfo().NumAckPending
		}
		if inFlight == 0 {
			return fmt.Errorf("nothing in flight")
		}
		return nil
	})
	// Runs that end from here on cannot be checkpointed: the bucket
	// refuses every write as too large, so the shards keep them dirty and
	// un-acked, and the replay after the kill must end them again. Without
	// this the kill would have to land between a run's summary and its
	// checkpoint (written at the run's end), a window of a round trip.
	kvName := "KV_" + cfg.Bucket
	kvs, err := js.Stream(t.Context(), kvName)
	if err != nil {
		t.Fatal(err)
	}
	kvCfg := kvs.CachedInfo().Config
	stalled := kvCfg
	stalled.MaxMsgSize = 1
	if _, err := js.UpdateStream(t.Context(), stalled); err != nil {
		t.Fatalf("refusing checkpoints: %v", err)
	}
	before := published.Load()
	wg.Wait()
	if midErr != nil {
		t.Fatal(midErr)
	}
	mustInterleave(t, js, late, 0, 1, 1, mid) // after each thread's other events
	waitFor(t, 60*time.Second, func() error {
		if n := published.Load() - before; n < 20 {
			return fmt.Errorf("%d run summaries published since checkpoints were refused", n)
		}
		return nil
	})
	if err := child.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = child.Wait()
	if _, err := js.UpdateStream(t.Context(), kvCfg); err != nil {
		t.Fatalf("accepting checkpoints again: %v", err)
	}
	t.Logf("killed ingest mid-load, %d run summaries after checkpoints were refused: %s",
		published.Load()-before, consumerState(t, js, &cfg))
	for k, v := range mid {
		seqs[k] = append(seqs[k], v...)
	}
	startChild(t, s.ClientURL())
	waitFor(t, 120*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })

	runs, events := 0, 0
	for _, s := range streams {
		events += len(s.events)
		for _, e := range s.events {
			if strings.Contains(string(e), `"RUN_STARTED"`) {
				runs++
			}
		}
	}
	var recs []tapRecord
	waitFor(t, 60*time.Second, func() error { // the restarted child's last tap acks
		recs = readTapStream(t, js, cfg.TapStream)
		n := 0
		for _, r := range recs {
			if strings.Split(r.subject, ".")[2] == "RUN_SUMMARY" {
				n++
			}
		}
		if n < runs {
			return fmt.Errorf("%d run summaries, want %d", n, runs)
		}
		return nil
	})
	byRun := map[string]int{}
	tapEvents := 0
	for _, r := range recs {
		if strings.Split(r.subject, ".")[2] != "RUN_SUMMARY" {
			tapEvents++
			continue
		}
		var s struct {
			Tenant, Thread, RunID string
			StartSeq              uint64
		}
		if err := json.Unmarshal(r.data, &s); err != nil {
			t.Fatalf("run summary %s: %v", r.data, err)
		}
		byRun[fmt.Sprintf("%s/%s@%d/%s", s.Tenant, s.Thread, s.StartSeq, s.RunID)]++
	}
	if len(byRun) != runs {
		t.Errorf("%d runs have a summary on the tap stream, want %d", len(byRun), runs)
	}
	for k, n := range byRun {
		if n != 1 {
			t.Errorf("run %s: %d summaries on the tap stream", k, n)
		}
	}
	t.Logf("%d runs, %d events; the tap stream holds %d events and %d run summaries", runs, events, tapEvents, len(recs)-tapEvents)
	if n := published.Load(); n <= int64(runs) {
		t.Errorf("%d run summaries published for %d runs: the replayed tail ended no run, so the test proved nothing", n, runs)
	} else {
		t.Logf("%d run summaries published (%d again by the replay), %d stored", n, n-int64(runs), len(byRun))
	}
}
