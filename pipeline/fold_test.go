package pipeline

import (
	"bytes"
	"context"
	"encoding/json"

	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// secondRun is appended to every conformance case in TestLiveViewIsStoredFold:
// after a case's fatal error it is a new run (patterns.md §1.1, Failed →
// Active), after a clean case one more run, after a case left running a
// nested RUN_STARTED (fatal L4). Whatever it is, the live view and the
// offline fold must agree on it.
//
// Its first event names another thread: ingest and the offline fold both
// remove it with a warning (OtherThread), and withThread leaves it alone.
var secondRun = []json.RawMessage{
	json.RawMessage(`{"type":"RUN_STARTED","thread\u0049d":"elsewhere","runId":"misrouted"}`),
	json.RawMessage(`{"type":"RUN_STARTED","threadId":"t","runId":"second"}`),
	json.RawMessage(`{"type":"TEXT_MESSAGE_CHUNK","messageId":"second-m","role":"assistant","delta":"after"}`),
	json.RawMessage(`{"type":"RUN_FINISHED","threadId":"t","runId":"second"}`),
}

// storedFolds reads every message of the event stream back from JetStream
// and folds each thread's events offline as `threadcast reduce --thread`
// does: the codec's StreamReader frames the stored bytes, and every event
// goes through FoldStored with its stored stream seq. It returns the
// views by thread token.
func storedFolds(t *testing.T, js jetstream.JetStream, stream string) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	threads := make(map[string]*reducer.Thread)
	var dec codec.Decoder
	var ev codec.Event
	for left := info.NumPending; left > 0; left-- {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		_, _, token, err := wire.ParseStoredSubject(msg.Subject())
		if err != nil {
			t.Fatalf("stored subject %q: %v", msg.Subject(), err)
		}
		th := threads[token]
		if th == nil {
			id, _ := wire.DecodeThread(token)
			th = reducer.NewThread(id)
			threads[token] = th
		}
		seq := meta.Sequence.Stream
		sr := codec.NewStreamReader(bytes.NewReader(msg.Data()))
		for {
			raw, err := sr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("seq %d: stored bytes frame no event: %v", seq, err)
			}
			err = dec.Decode(raw, &ev)
			history.FoldStored(th, th.ThreadID(), seq, &ev, err, dec.Warnings())
		}
	}
	out := make(map[string][]byte, len(threads))
	for tok, th := range threads {
		out[tok] = th.AppendView(nil)
	}
	return out
}

// TestLiveViewIsStoredFold publishes every conformance case, each followed by
// a second run, through a real server and ingest, and compares each thread's
// live view (its snapshot) with the offline fold of the events the stream
// stored. The cases with a fatal error are where the two used to part: the
// live thread went on to the second run while `threadcast reduce` stopped.
func TestLiveViewIsStoredFold(t *testing.T) {
	for _, batch := range []int{1, 4} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			s := runServer(t)
			nc := connect(t, s)
			js, _ := jetstream.New(nc)
			cfg := testConfig()
			startIngest(t, nc, cfg)
			streams := corpusStreams(t)
			for i := range streams {
				streams[i].events = append(append([]json.RawMessage(nil), streams[i].events...), withThread(secondRun, streams[i].thread)...)
			}
			seqs := publishStreams(t, js, streams, batch)
			live := make(map[string]wire.Snapshot, len(streams))
			for _, st := range streams {
				ss := seqs[st.tenant+"/"+st.thread]
				waitFor(t, 30*time.Second, func() error {
					snap, err := snapshot(nc, cfg.Partitions, st.tenant, st.thread)
					if err != nil {
						return err
					}
					if snap.Seq != ss[len(ss)-1] {
						return fmt.Errorf("%s: snapshot seq %d, want %d", st.thread, snap.Seq, ss[len(ss)-1])
					}
					live[st.thread] = snap
					return nil
				})
			}
			offline := storedFolds(t, js, cfg.Stream)
			if len(offline) != len(streams) {
				t.Fatalf("%d threads stored, want %d", len(offline), len(streams))
			}
			rejected := 0
			for _, st := range streams {
				got, want := live[st.thread].View, offline[wire.EncodeThread(st.thread)]
				if !bytes.Equal(got, want) {
					t.Errorf("%s: live view differs from the fold of the stored events\nlive    %s\noffline %s", st.thread, got, want)
				}
				if strings.HasSuffix(st.thread, "-fatal") {
					rejected++
					// The spec's own account of what follows a rejection,
					// independent of both folds: the second run is a new,
					// clean run, and its message is in the view.
					if !bytes.Contains(got, []byte(`{"runId":"second","threadId":"`+st.thread+`","status":"finished","verdict":"ok"}`)) ||
						!bytes.Contains(got, []byte(`"content":"after"`)) {
						t.Errorf("%s: the run after the rejection is not in the view: %s", st.thread, got)
					}
				}
			}
			if rejected == 0 {
				t.Fatal("no case with a fatal error in the corpus")
			}
			for _, st := range streams {
				if bytes.Contains(live[st.thread].View, []byte("misrouted")) {
					t.Errorf("%s: the event naming another thread was applied", st.thread)
				}
			}
		})
	}
}
