package history_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
	"github.com/threadcast/threadcast/jsondoc"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// TestViewAt stores a thread of many messages (more than one fetch of
// ViewAt's, some of them batches), interleaved with another thread's, and
// checks the view at seqs across it against the reducer applied directly to
// the thread's events up to each; then the errors.
func TestViewAt(t *testing.T) {
	ns := natstest.Start(t)
	nc := natstest.Connect(t, ns.ClientURL())
	js, _ := jetstream.New(nc)
	cfg := pipeline.DefaultConfig()
	if _, _, err := pipeline.EnsureStreams(t.Context(), js, &cfg); err != nil {
		t.Fatal(err)
	}
	pub := func(thread, data string) uint64 {
		subj, _ := wire.EventSubject("acme", thread)
		ack, err := js.PublishMsg(t.Context(), &nats.Msg{Subject: subj, Data: []byte(data)})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	type stored struct {
		seq uint64
		raw string
	}
	var evs []stored
	add := func(lines ...string) {
		seq := pub("t1", strings.Join(lines, "\n"))
		for _, l := range lines {
			evs = append(evs, stored{seq, l})
		}
		pub("t2", `{"type":"RUN_STARTED","threadId":"t2","runId":"x"}`)
	}
	add(`{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`)
	for i := range 300 {
		id := fmt.Sprintf("m%d", i)
		if i%3 == 0 {
			add(`{"type":"TEXT_MESSAGE_START","messageId":"`+id+`","role":"assistant"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"`+id+`","delta":"part `+id+`"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"`+id+`"}`)
			continue
		}
		add(`{"type":"TEXT_MESSAGE_CHUNK","messageId":"` + id + `","role":"assistant","delta":"chunk ` + id + `"}`)
	}
	add(`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`)
	last := evs[len(evs)-1].seq

	reduce := func(at uint64) []byte {
		th := reducer.NewThread("t1")
		var dec codec.Decoder
		var ev codec.Event
		for _, e := range evs {
			if e.seq > at {
				break
			}
			err := dec.Decode([]byte(e.raw), &ev)
			th.ApplyDecoded(e.seq, &ev, err, dec.Warnings())
		}
		return th.AppendView(nil)
	}
	for _, at := range []uint64{evs[0].seq, evs[0].seq + 1, evs[10].seq, evs[len(evs)/2].seq + 1, last - 1, last} {
		th, err := history.ViewAt(t.Context(), js, cfg.Stream, "acme", "t1", at)
		if err != nil {
			t.Fatalf("at %d: %v", at, err)
		}
		if eq, err := jsondoc.Equal(th.AppendView(nil), reduce(at)); err != nil || !eq {
			t.Fatalf("at %d: view differs from the reduction of the events up to it:\n%.500s\nwant\n%.500s", at, th.AppendView(nil), reduce(at))
		}
	}

	var beyond *history.BeyondError
	if _, err := history.ViewAt(t.Context(), js, cfg.Stream, "acme", "t1", last+2); !errors.As(err, &beyond) || beyond.Last != last || beyond.At != last+2 {
		t.Errorf("past the end: %v", err)
	}
	if _, err := history.ViewAt(t.Context(), js, cfg.Stream, "acme", "nobody", 1); !errors.Is(err, history.ErrNoThread) {
		t.Errorf("no such thread: %v", err)
	}
	if _, err := history.ViewAt(t.Context(), js, cfg.Stream, "other", "t1", 1); !errors.Is(err, history.ErrNoThread) {
		t.Errorf("another tenant's thread of that id: %v", err)
	}
	if _, err := history.ViewAt(t.Context(), js, "NO_SUCH_STREAM", "acme", "t1", 1); err == nil || !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("no such stream: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := history.ViewAt(ctx, js, cfg.Stream, "acme", "t1", last); err == nil {
		t.Error("a cancelled context: no error")
	}
	// Its consumers are gone.
	st, _ := js.Stream(t.Context(), cfg.Stream)
	info, err := st.Info(t.Context())
	if err != nil || info.State.Consumers != 0 {
		t.Errorf("%v consumers left on the event stream (%v)", info.State.Consumers, err)
	}
}
