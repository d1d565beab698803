package agent_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/testsupport/natstest"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// testEnv is an embedded nats-server with JetStream and the event stream as
// the pipeline configures it.
type testEnv struct {
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

// startJS starts an embedded server (natstest.Start), creates the
// AGUI_EVENTS stream with pipeline.StreamConfig (unless noStream), and
// shuts everything down in t.Cleanup.
func startJS(t testing.TB, noStream bool) *testEnv {
	t.Helper()
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.ClientURL())
	js := natstest.JetStream(t, nc)
	if !noStream {
		cfg := pipeline.DefaultConfig()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := js.CreateStream(ctx, pipeline.StreamConfig(&cfg)); err != nil {
			t.Fatal(err)
		}
	}
	return &testEnv{srv: srv, nc: nc, js: js}
}

// storedMsg is one message read back from the stream.
type storedMsg struct {
	seq    uint64
	tenant string
	thread string // decoded thread id
	header nats.Header
	events [][]byte
}

// readStream returns every message of AGUI_EVENTS in stream order, split
// into its events (JSONL lines).
func readStream(t testing.TB, js jetstream.JetStream) []storedMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, wire.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []storedMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		_, tenant, token, err := wire.ParseStoredSubject(m.Subject)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		thread, err := wire.DecodeThread(token)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		out = append(out, storedMsg{seq: seq, tenant: tenant, thread: thread, header: m.Header,
			events: bytes.Split(m.Data, []byte("\n"))})
	}
	return out
}

// streamCount returns the number of messages in AGUI_EVENTS.
func streamCount(t testing.TB, js jetstream.JetStream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, wire.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// contentEvent returns a valid TEXT_MESSAGE_CONTENT event whose delta is i.
func contentEvent(msgID string, i int) []byte {
	return []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"` + msgID + `","delta":"` + strconv.Itoa(i) + `"}`)
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
