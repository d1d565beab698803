package pipeline

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// A thread evicted while a chunk stream is open, then reloaded, goes on
// framing from the middle of that stream: a client applying its frames
// still ends with the thread's view (the STEP_STARTED that closes the
// stream is not folded away with its STEP_FINISHED).
func TestFramesFoldAfterReloadMidChunk(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.MemoryBudget = 1
	cfg.CheckpointEvery = 1
	cfg.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg)
	sub, err := nc.SubscribeSync(wire.ViewSubject("acme", wire.EncodeThread("cl")))
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := wire.EventSubject("acme", "cl")
	pub := func(lines ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		msg := &nats.Msg{Subject: subj, Data: []byte(strings.Join(lines, "\n"))}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	client := reducer.NewThread("cl")
	var dec codec.Decoder
	var ev codec.Event
	readFrame := func() {
		msg, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		seq, _ := strconv.ParseUint(msg.Header.Get(wire.HeaderSeq), 10, 64)
		f, err := wire.ParseFrame(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range f.Events {
			if err := dec.Decode(bytes.Clone(raw), &ev); err != nil {
				t.Fatal(err)
			}
			client.Apply(seq, &ev)
		}
	}
	pub(`{"type":"RUN_STARTED","threadId":"cl","runId":"r1"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"assistant","delta":"a"}`)
	readFrame()
	waitFor(t, 10*time.Second, func() error {
		if counter(t, cfg.Metrics.Evictions) == 0 {
			return errors.New("not evicted yet")
		}
		return nil
	})
	// STEP_STARTED closes m1's chunk stream; the id-less chunk then opens
	// nothing (S10: the run is rejected).
	pub(`{"type":"STEP_STARTED","stepName":"s"}`,
		`{"type":"STEP_FINISHED","stepName":"s"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","delta":"b"}`)
	readFrame()
	snap, err := snapshot(nc, cfg.Partitions, "acme", "cl")
	if err != nil {
		t.Fatal(err)
	}
	want := viewOf(t, snap.View)
	got := viewOf(t, client.AppendView(nil))
	for _, k := range []string{"status", "messages"} {
		if !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("%s from frames %v, view %v", k, got[k], want[k])
		}
	}
}
