package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// staleReplica makes a mirror of the checkpoint bucket's stream that answers
// its direct gets (MirrorDirect) and holds what the bucket holds now: it
// accepts no message beyond the ones mirrored here (MaxMsgs, DiscardNew).
// It stands for a replica that lags behind the stream's leader — a server
// back from a restart, which answers direct gets once 90 % synchronized,
// or one cut off from the others — deterministically, on one server: from
// then on about every other direct get of a key written since returns its
// older value.
func staleReplica(t *testing.T, js jetstream.JetStream, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	n := st.CachedInfo().State.Msgs
	m, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "STALE_" + bucket, Mirror: &jetstream.StreamSource{Name: "KV_" + bucket}, MirrorDirect: true,
		MaxMsgs: int64(n), Discard: jetstream.DiscardNew,
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		info, err := m.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != n {
			return fmt.Errorf("stale mirror holds %d messages, want %d", info.State.Msgs, n)
		}
		return nil
	})
}

// TestCheckpointsReadFromLeader: a replica of the checkpoint bucket that
// lags behind its leader must not be where an ingest reads the checkpoints
// it reloads. Ingest checkpoints every thread and acks (run 1), the
// bucket's replica falls behind, ingest checkpoints newer views and acks
// them (run 2); run 3 replays from the ack floor. A checkpoint read from the
// lagging replica is run 1's: run 2's events, acked, are never applied
// again and the view loses them (what the chaos run's partition showed:
// live views ≠ the offline reduction of the stored events, nothing stored
// twice, no gap).
func TestCheckpointsReadFromLeader(t *testing.T) {
	checkNoGoroutineLeak(t)
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.CheckpointInterval = time.Minute // only counts and shutdown checkpoint
	cfg.AckWait = time.Hour
	streams := genStreams(t, 40, "lag")
	seqs := map[string][]uint64{}

	run := func(lo, hi int) {
		t.Helper()
		ti := startIngest(t, nc, cfg)
		mustInterleave(t, js, streams, lo, hi, 1, seqs)
		waitFor(t, 30*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
		if err := ti.stop(); err != nil {
			t.Fatalf("Run over events [%d, %d): %v", lo, hi, err)
		}
	}
	run(0, 8)
	staleReplica(t, js, cfg.Bucket)
	run(8, 16)

	mustInterleave(t, js, streams, 16, 1000, 4, seqs)
	startIngest(t, nc, cfg)
	bad := 0
	for _, s := range streams {
		key := s.tenant + "/" + s.thread
		want := seqs[key][len(seqs[key])-1]
		var got []byte
		waitFor(t, 30*time.Second, func() error {
			snap, err := snapshot(nc, cfg.Partitions, s.tenant, s.thread)
			if err != nil {
				return err
			}
			if snap.Seq != want {
				return fmt.Errorf("%s: snapshot seq %d, want %d", s.thread, snap.Seq, want)
			}
			got = snap.View
			return nil
		})
		if !reflect.DeepEqual(viewOf(t, got), offlineView(t, s.thread, s.events, seqs[key])) {
			if bad == 0 {
				w, _ := json.Marshal(offlineView(t, s.thread, s.events, seqs[key]))
				t.Errorf("%s: view at seq %d differs from the offline reduction\n got %s\nwant %s", s.thread, want, got, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d views differ from the offline reduction", bad, len(streams))
	}
}

// TestFenceRevisionFromLeader: a checkpoint write whose key's revision
// the store does not know (forgotten, or a write that failed) reads it back
// first; read from a lagging replica, the revision is older than the key's
// and the write is refused as fenced although nobody else wrote the key.
func TestFenceRevisionFromLeader(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	const bucket = "FENCE_LAG"
	st := newTestFencedStore(t, nc, bucket, nil)
	const keys = 32
	for i := range keys {
		if err := putWait(t, st, fmt.Sprintf("acme.k%d", i), "v1"); err != nil {
			t.Fatal(err)
		}
	}
	staleReplica(t, js, bucket)
	for i := range keys {
		if err := putWait(t, st, fmt.Sprintf("acme.k%d", i), "v2"); err != nil {
			t.Fatal(err)
		}
	}
	// A store that knows no revision (another Ingest of this instance: the
	// next run of the partition) writes every key once more.
	fenced := 0
	st2 := newTestFencedStore(t, nc, bucket, func(error) { fenced++ })
	for i := range keys {
		key := fmt.Sprintf("acme.k%d", i)
		if v, err := st2.Get(t.Context(), key); err != nil || string(v) != "v2" {
			t.Errorf("%s read back as %q, %v; want v2", key, v, err)
		}
		st2.revs = map[string]uint64{} // forgotten: Put reads it back
		if err := putWait(t, st2, key, "v3"); err != nil {
			t.Errorf("%s: %v", key, err)
			st2.fencedErr = nil // go on: count them all
		}
	}
	if fenced > 0 {
		t.Errorf("%d of %d writes fenced with no other writer", fenced, keys)
	}
}
